"""Forms issue 32 brought onto naive kernels, each against an independent reference: Einsum
against numpy.einsum (diagonals, sums, "..." broadcasting, implicit outputs, three operands,
integers) with its malformed equations refused; 3-D Conv/ConvTranspose, LpPool and MaxPool's
Indices output against ONNX Runtime; PRelu-6's per-channel slope against numpy."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import cuvil
import cuvil_testlib as tl

F = TensorProto.FLOAT


def _vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


EINSUM = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),                        # implicit: the trace
    ("...ii->...i", [(2, 3, 4, 4)]),
    ("ij->", [(3, 5)]),
    ("ij,ij->i", [(2, 1), (2, 3)]),          # a dim of 1 broadcasts against the label (as numpy)
    ("...i,...i->...", [(2, 1, 3), (4, 3)]),  # ellipsis dims broadcast right-aligned
    ("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 2)]),
    ("ba,ab", [(2, 3), (3, 2)]),             # implicit: no label left, a scalar
    ("Ba,aB", [(2, 3), (3, 2)]),
    ("bA", [(2, 3)]),                        # implicit: labels in character order, upper case first
    ("i,j->ij", [(3,), (4,)]),
    (" i j , j k -> i k ", [(2, 3), (3, 2)]),
    ("iji->j", [(2, 3, 2)]),
    # two-operand contractions the GEMM reads in place (test_einsum_contractions_take_the_gemm)
    ("bhqd,bhkd->bhqk", [(2, 3, 5, 4), (2, 3, 6, 4)]),
    ("bhqk,bhkd->bhqd", [(2, 3, 5, 6), (2, 3, 6, 4)]),
    ("bqhd,bkhd->bhqk", [(2, 5, 3, 4), (2, 6, 3, 4)]),   # batch b, h not nested: a table of offsets
    ("ij,kj->ik", [(3, 4), (5, 4)]),
    ("ji,jk->ik", [(4, 3), (4, 5)]),
    ("ij,jk->ki", [(3, 4), (4, 5)]),                    # C stored transposed: C^T = B^T A^T
    ("bij,bkj->bki", [(2, 3, 4), (2, 5, 4)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (1, 4, 5)]),      # B broadcast: its batch joins A's rows
    ("bi,bi->b", [(3, 4), (3, 4)]),
    ("bi,bj->bij", [(2, 3), (2, 4)]),                   # no summed label: K = 1
    ("bnd,dh->bnh", [(2, 3, 4), (4, 5)]),
    ("ii,ij->ij", [(3, 3), (3, 4)]),                    # a diagonal in one operand
    # left on the loop: a label summed in one operand only, rows that do not nest in C
    ("ij,jk->i", [(3, 4), (4, 5)]),
    ("abc,cd->dba", [(2, 3, 4), (4, 5)]),
]

GEMM_EINSUM = ["ij,jk->ik", "bij,bjk->bik", "bhqd,bhkd->bhqk", "bhqk,bhkd->bhqd", "bqhd,bkhd->bhqk", "ij,kj->ik",
               "ji,jk->ik", "ij,jk->ki", "bij,bkj->bki", "...ij,...jk->...ik", "bi,bi->b", "bi,bj->bij", "bnd,dh->bnh",
               "i,j->ij", "ii,ij->ij"]


@pytest.mark.parametrize("eq,shapes", EINSUM)
def test_einsum_against_numpy(tmp_path, eq, shapes):
    rng = np.random.default_rng(abs(hash(eq)) % 2**32)
    names = [f"x{i}" for i in range(len(shapes))]
    feeds = {n: rng.standard_normal(s).astype(np.float32) for n, s in zip(names, shapes)}
    want = np.einsum(eq, *feeds.values())
    path = tl.onnx_graph_model(tmp_path / "e.onnx", [helper.make_node("Einsum", names, ["y"], equation=eq)],
                               [_vi(n, F, s) for n, s in zip(names, shapes)], [("y", F)], opset=12)
    got = cuvil.load(tl.compile(path, tmp_path / "e"))(**feeds)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_einsum_contractions_take_the_gemm(tmp_path):
    """A float32 contraction of two operands runs as cuvil_f32_gemm (a 64 x 112 x 112 batched
    product took 653 ms in the naive loop, 2.1 in the GEMM); the forms it cannot read in place
    keep the loop. (The values: test_einsum_against_numpy, same equations.)"""
    shapes = dict(EINSUM)
    for eq in GEMM_EINSUM + ["ij,jk->i", "abc,cd->dba"]:
        names = [f"x{i}" for i in range(len(shapes[eq]))]
        path = tl.onnx_graph_model(tmp_path / "e.onnx", [helper.make_node("Einsum", names, ["y"], equation=eq)],
                                   [_vi(n, F, s) for n, s in zip(names, shapes[eq])], [("y", F)], opset=12)
        out = tl.compile(path, tmp_path / f"c{GEMM_EINSUM.index(eq) if eq in GEMM_EINSUM else eq[-3:]}", emit="c")
        src = "".join(p.read_text() for p in sorted(out.glob("part_*.c")))
        if eq in GEMM_EINSUM:
            assert "cuvil_f32_gemm(" in src and "cuvil_einsum_t(" not in src, eq
        else:
            assert "cuvil_einsum_t(" in src and "cuvil_f32_gemm(" not in src, eq


@pytest.mark.parametrize("t,np_t", [(TensorProto.INT32, np.int32), (TensorProto.INT64, np.int64),
                                    (TensorProto.DOUBLE, np.float64)])
def test_einsum_other_types(tmp_path, t, np_t):
    rng = np.random.default_rng(3)
    a = rng.integers(-5, 6, (2, 3, 4)).astype(np_t)
    b = rng.integers(-5, 6, (2, 4, 3)).astype(np_t)
    path = tl.onnx_graph_model(tmp_path / "e.onnx", [helper.make_node("Einsum", ["a", "b"], ["y"], equation="bij,bjk->bk")],
                               [_vi("a", t, [2, 3, 4]), _vi("b", t, [2, 4, 3])], [("y", t)], opset=12)
    got = cuvil.load(tl.compile(path, tmp_path / "e"))(a=a, b=b)
    assert got.dtype == np_t
    np.testing.assert_array_equal(got, np.einsum("bij,bjk->bk", a, b))


@pytest.mark.parametrize("eq,shapes,msg", [
    ("ij,jk", [(2, 3)], "2 terms for 1 inputs"),
    ("ij->k", [(2, 3)], "output label k is in no input"),
    ("ij->ii", [(2, 3)], "appears twice"),
    ("ij", [(2, 3, 4)], "rank 3"),
    ("i.j", [(2, 3)], "outside"),
    ("ij,jk->ik", [(2, 3), (4, 5)], "where the label has"),
    ("...i->i", [(2, 3)], "the output does not name"),
    ("i$", [(2, 3)], "not a label"),
])
def test_einsum_malformed(tmp_path, eq, shapes, msg):
    names = [f"x{i}" for i in range(len(shapes))]
    path = tl.onnx_graph_model(tmp_path / "e.onnx", [helper.make_node("Einsum", names, ["y"], equation=eq)],
                               [_vi(n, F, s) for n, s in zip(names, shapes)], [("y", F)], opset=12)
    proc = tl.compile_raw(path, tmp_path / "e.so")
    tl.assert_clean_failure(proc, mentions=["Einsum", msg])


def test_conv3d_lppool_maxpool_indices(tmp_path):
    rng = np.random.default_rng(11)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 0, 1, 1, 0, 1], strides=[1, 2, 1], group=2),
             helper.make_node("ConvTranspose", ["c", "wt"], ["t"], strides=[2, 1, 2], output_padding=[1, 0, 0]),
             helper.make_node("LpPool", ["x"], ["l"], kernel_shape=[2, 3, 2], p=3, pads=[1, 1, 0, 0, 1, 1]),
             helper.make_node("MaxPool", ["x"], ["m", "mi"], kernel_shape=[2, 2, 2], strides=[2, 1, 2], ceil_mode=1),
             helper.make_node("MaxPool", ["x2"], ["m2", "mi2"], kernel_shape=[3, 2], pads=[1, 0, 1, 1], storage_order=1)]
    vis = [_vi("x", F, [2, 4, 5, 6, 5]), _vi("w", F, [6, 2, 3, 2, 3]), _vi("b", F, [6]), _vi("wt", F, [6, 3, 2, 2, 3]),
           _vi("x2", F, [2, 3, 5, 4])]
    feeds = {"x": rng.standard_normal((2, 4, 5, 6, 5)).astype(np.float32),
             "w": rng.standard_normal((6, 2, 3, 2, 3)).astype(np.float32),
             "b": rng.standard_normal(6).astype(np.float32),
             "wt": rng.standard_normal((6, 3, 2, 2, 3)).astype(np.float32),
             "x2": rng.standard_normal((2, 3, 5, 4)).astype(np.float32)}
    outs = [("c", F), ("t", F), ("l", F), ("m", F), ("mi", TensorProto.INT64), ("m2", F), ("mi2", TensorProto.INT64)]
    path = tl.onnx_graph_model(tmp_path / "nd.onnx", nodes, vis, outs, opset=18)
    model = cuvil.load(tl.compile(path, tmp_path / "nd"))
    tl.check_vs_ort(model, path, feeds, rtol=1e-4, atol=1e-4)


def test_prelu6_per_channel_slope(tmp_path):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    s = np.array([0.1, -0.5, 2.0], np.float32)
    path = tl.onnx_graph_model(tmp_path / "p.onnx", [helper.make_node("PRelu", ["x", "s"], ["y"])],
                               [_vi("x", F, [2, 3, 4, 5]), _vi("s", F, [3])], [("y", F)], opset=6)
    got = cuvil.load(tl.compile(path, tmp_path / "p"))(x=x, s=s)
    np.testing.assert_allclose(got, np.where(x >= 0, x, x * s[None, :, None, None]), rtol=1e-6)


@pytest.mark.parametrize("mode,skip,lo,hi", [("TF", 0, 1, 2), ("IDF", 2, 2, 3), ("TFIDF", 1, 1, 3)])
def test_tfidf_against_ort(tmp_path, mode, skip, lo, hi):
    rng = np.random.default_rng(21 + skip)
    grams = lambda k, n: [int(v) for v in rng.permutation(np.array(np.meshgrid(*[range(5)] * k)).reshape(k, -1).T)[:n].ravel()]
    pool = grams(1, 5) + grams(2, 8) + grams(3, 3)   # 5 unigrams, 8 bigrams, 3 trigrams, none twice
    indexes = [int(v) for v in rng.permutation(16)]
    attrs = dict(mode=mode, min_gram_length=lo, max_gram_length=hi, max_skip_count=skip, ngram_counts=[0, 5, 21],
                 ngram_indexes=indexes, pool_int64s=pool)
    if mode != "TF":
        attrs["weights"] = [float(v) for v in rng.uniform(0.5, 2, 16)]
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)
    path = tl.onnx_graph_model(tmp_path / "t.onnx", [node], [_vi("x", TensorProto.INT32, [3, 12])], [("y", F)], opset=9)
    model = cuvil.load(tl.compile(path, tmp_path / "t"))
    tl.check_vs_ort(model, path, {"x": rng.integers(0, 5, (3, 12)).astype(np.int32)}, rtol=1e-6, atol=1e-6)
    # the same n-gram twice in the pool: refused (ONNX Runtime refuses it too)
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], **{**attrs, "pool_int64s": pool[:7] + pool[5:7] + pool[9:]})
    path = tl.onnx_graph_model(tmp_path / "d.onnx", [node], [_vi("x", TensorProto.INT32, [3, 12])], [("y", F)], opset=9)
    tl.assert_clean_failure(tl.compile_raw(path, tmp_path / "d.so"), mentions=["TfIdfVectorizer", "twice"])


def test_det_and_batchnorm_training(tmp_path):
    rng = np.random.default_rng(17)
    a = rng.standard_normal((3, 2, 5, 5)).astype(np.float32)
    a[0, 1, 2] = a[0, 1, 4]   # a singular matrix
    path = tl.onnx_graph_model(tmp_path / "d.onnx", [helper.make_node("Det", ["a"], ["d"])], [_vi("a", F, [3, 2, 5, 5])],
                               [("d", F)], opset=11)
    got = cuvil.load(tl.compile(path, tmp_path / "d"))(a=a)
    np.testing.assert_allclose(got, np.linalg.det(a.astype(np.float64)), rtol=1e-4, atol=1e-5)
    # BatchNormalization in training mode against numpy: batch statistics, running averages
    x = rng.standard_normal((4, 3, 5)).astype(np.float32)
    s, b, mu, var = (rng.uniform(0.5, 1.5, 3).astype(np.float32) for _ in range(4))
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "mu", "var"], ["y", "rm", "rv"], training_mode=1,
                            momentum=0.8, epsilon=1e-3)
    path = tl.onnx_graph_model(tmp_path / "bn.onnx", [node], [_vi(n, F, sh) for n, sh in
                               [("x", [4, 3, 5]), ("s", [3]), ("b", [3]), ("mu", [3]), ("var", [3])]],
                               [("y", F), ("rm", F), ("rv", F)], opset=15)
    y, rm, rv = cuvil.load(tl.compile(path, tmp_path / "bn"))(x=x, s=s, b=b, mu=mu, var=var)
    bm, bv = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
    np.testing.assert_allclose(y, (x - bm[:, None]) / np.sqrt(bv[:, None] + 1e-3) * s[:, None] + b[:, None], rtol=1e-4,
                               atol=1e-5)
    np.testing.assert_allclose(rm, mu * 0.8 + bm * 0.2, rtol=1e-5)
    np.testing.assert_allclose(rv, var * 0.8 + bv * 0.2, rtol=1e-5)


def test_group_norm_against_ort(tmp_path):
    rng, opset, sc = np.random.default_rng(21), 21, 6
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2, epsilon=1e-4)
    path = tl.onnx_graph_model(tmp_path / "g.onnx", [node], [_vi("x", F, [3, 6, 4, 5]), _vi("s", F, [sc]), _vi("b", F, [sc])],
                               [("y", F)], opset=opset)
    model = cuvil.load(tl.compile(path, tmp_path / "g"))
    feeds = {"x": rng.standard_normal((3, 6, 4, 5)).astype(np.float32), "s": rng.standard_normal(sc).astype(np.float32),
             "b": rng.standard_normal(sc).astype(np.float32)}
    tl.check_vs_ort(model, path, feeds, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("inverse,onesided,length,cplx", [(0, 0, None, False), (0, 1, 7, False), (0, 0, 12, True),
                                                          (1, 0, None, True), (1, 1, 10, True), (1, 1, 9, True)])
def test_dft_against_numpy(tmp_path, inverse, onesided, length, cplx):
    rng = np.random.default_rng(30 + 3 * inverse + onesided)
    x = rng.standard_normal((2, 6, 3, 2 if cplx else 1)).astype(np.float32)
    inits = [helper.make_tensor("len", TensorProto.INT64, [], [length])] if length else []
    node = helper.make_node("DFT", ["x", "len" if length else "", "ax"], ["y"], inverse=inverse, onesided=onesided)
    inits.append(helper.make_tensor("ax", TensorProto.INT64, [], [1]))
    path = tl.onnx_graph_model(tmp_path / "d.onnx", [node], [_vi("x", F, list(x.shape))], [("y", F)], inits=inits, opset=20)
    got = cuvil.load(tl.compile(path, tmp_path / "d"))(x=x)
    c = x[..., 0] + 1j * x[..., 1] if cplx else x[..., 0]
    if inverse and onesided:
        want = np.fft.irfft(c, n=length, axis=1)[..., None]
    elif inverse:
        w = np.fft.ifft(c, n=length, axis=1)
        want = np.stack([w.real, w.imag], -1)
    else:
        w = np.fft.fft(c, n=length, axis=1)
        if onesided:
            w = w[:, : (length or 6) // 2 + 1]
        want = np.stack([w.real, w.imag], -1)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_stft_against_numpy_and_runtime_step_checked(tmp_path):
    rng = np.random.default_rng(40)
    sig = rng.standard_normal((2, 50, 1)).astype(np.float32)
    win = np.hanning(12).astype(np.float32)
    node = helper.make_node("STFT", ["s", "step", "w", "len"], ["y"])
    path = tl.onnx_graph_model(tmp_path / "s.onnx", [node], [_vi("s", F, [2, 50, 1]), _vi("step", TensorProto.INT64, []),
                               _vi("w", F, [12]), _vi("len", TensorProto.INT64, [])], [("y", F)],
                               opset=17)
    import onnx
    m = onnx.load(path)   # the output's shape declared: 1 + (50 - 12) // 5 = 8 frames, 7 bins
    del m.graph.output[0].type.tensor_type.shape.dim[:]
    for d in (2, 8, 7, 2):
        m.graph.output[0].type.tensor_type.shape.dim.add().dim_value = d
    onnx.save(m, path)
    model = cuvil.load(tl.compile(path, tmp_path / "s"))
    got = model(s=sig, step=np.array(5, np.int64), w=win, len=np.array(12, np.int64))
    frames = np.stack([sig[:, f * 5:f * 5 + 12, 0] * win for f in range(8)], 1)
    w = np.fft.rfft(frames, axis=-1)
    np.testing.assert_allclose(got, np.stack([w.real, w.imag], -1), rtol=1e-4, atol=1e-4)
    with pytest.raises(cuvil.CuvilError, match=r"STFT.*frame_step"):   # 6 frames: not the declared 8
        model(s=sig, step=np.array(7, np.int64), w=win, len=np.array(12, np.int64))


@pytest.mark.parametrize("interleaved,rot", [(0, 0), (1, 4)])
def test_rotary_embedding_against_ort(tmp_path, interleaved, rot):
    rng = np.random.default_rng(50 + interleaved)
    D, H = 8, 2
    half = (rot or D) // 2
    node = helper.make_node("RotaryEmbedding", ["x", "c", "s", "p"], ["y"], interleaved=interleaved, num_heads=H,
                            rotary_embedding_dim=rot)
    vis = [_vi("x", F, ["b", "seq", H * D]), _vi("c", F, [16, half]), _vi("s", F, [16, half]),
           _vi("p", TensorProto.INT64, ["b", "seq"])]
    path = tl.onnx_graph_model(tmp_path / "r.onnx", [node], vis, [("y", F)], opset=23)
    model = cuvil.load(tl.compile(path, tmp_path / "r", dims={"b": "1:3", "seq": "1:8"}))
    ang = rng.uniform(0, 6, (16, half))
    feeds = {"x": rng.standard_normal((2, 5, H * D)).astype(np.float32), "c": np.cos(ang).astype(np.float32),
             "s": np.sin(ang).astype(np.float32), "p": rng.integers(0, 16, (2, 5)).astype(np.int64)}
    tl.check_vs_ort(model, path, feeds, rtol=1e-5, atol=1e-5)
    with pytest.raises(cuvil.CuvilError, match="position id is outside"):
        model(**{**feeds, "p": np.full((2, 5), 16, np.int64)})


def test_center_crop_pad_affine_grid_col2im_against_ort(tmp_path):
    rng = np.random.default_rng(60)
    nodes = [helper.make_node("CenterCropPad", ["x", "shape"], ["c"], axes=[0, -1]),
             helper.make_node("AffineGrid", ["theta", "size"], ["g"], align_corners=1),
             helper.make_node("Col2Im", ["cols", "img", "blk"], ["im"], strides=[2, 1], pads=[1, 0, 0, 1], dilations=[1, 2])]
    vis = [_vi("x", TensorProto.INT32, [7, 4, 6]), _vi("shape", TensorProto.INT64, [2]), _vi("theta", F, [2, 3, 4]),
           _vi("size", TensorProto.INT64, [5]), _vi("cols", F, [2, 12, 6]), _vi("img", TensorProto.INT64, [2]),
           _vi("blk", TensorProto.INT64, [2])]
    outs = [("c", TensorProto.INT32), ("g", F), ("im", F)]
    path = tl.onnx_graph_model(tmp_path / "m.onnx", nodes, vis, outs, opset=20)
    import onnx
    m = onnx.load(path)   # the shapes the run-time inputs give, declared
    for o, dims in zip(m.graph.output, ([4, 4, 9], [2, 3, 4, 5, 3], [2, 2, 5, 5])):
        for d in dims:
            o.type.tensor_type.shape.dim.add().dim_value = d
    onnx.save(m, path)
    model = cuvil.load(tl.compile(path, tmp_path / "m"))
    feeds = {"x": rng.integers(-50, 50, (7, 4, 6)).astype(np.int32), "shape": np.array([4, 9], np.int64),
             "theta": rng.standard_normal((2, 3, 4)).astype(np.float32), "size": np.array([2, 1, 3, 4, 5], np.int64),
             "cols": rng.standard_normal((2, 12, 6)).astype(np.float32), "img": np.array([5, 5], np.int64),
             "blk": np.array([2, 3], np.int64)}
    tl.check_vs_ort(model, path, feeds, rtol=1e-5, atol=1e-5)
    with pytest.raises(cuvil.CuvilError, match="CenterCropPad.*another output"):
        model(**{**feeds, "shape": np.array([4, 8], np.int64)})


@pytest.mark.parametrize("case", ["tf_crop", "not_larger", "not_smaller"])
def test_resize_tf_crop_and_keep_aspect_against_ort(tmp_path, case):
    rng = np.random.default_rng(70)
    if case == "tf_crop":
        node = helper.make_node("Resize", ["x", "roi", "", "sizes"], ["y"], mode="linear",
                                coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-3.0)
        inits = [helper.make_tensor("roi", F, [8], [0, 0, -0.2, 0.1, 1, 1, 0.9, 1.3]),
                 helper.make_tensor("sizes", TensorProto.INT64, [4], [1, 2, 5, 6])]
    else:
        node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="nearest", axes=[2, 3],
                                keep_aspect_ratio_policy=case)
        inits = [helper.make_tensor("sizes", TensorProto.INT64, [2], [7, 4])]
    path = tl.onnx_graph_model(tmp_path / "r.onnx", [node], [_vi("x", F, [1, 2, 4, 5])], [("y", F)], inits=inits, opset=19)
    model = cuvil.load(tl.compile(path, tmp_path / "r"))
    tl.check_vs_ort(model, path, {"x": rng.standard_normal((1, 2, 4, 5)).astype(np.float32)}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,scales,ctm", [
    ((1, 3, 40, 70), (2.0, 2.0), "half_pixel"),           # rows past a block, columns past a chunk
    ((2, 2, 23, 45), (1.7, 2.3), "pytorch_half_pixel"),
    ((1, 2, 50, 90), (0.6, 0.45), "half_pixel"),          # downsampling: the next row's source rows both new
    ((1, 1, 9, 130), (3.0, 1.0), "align_corners"),        # the last axis unchanged: one tap a column
    ((1, 2, 17, 33), (2.0, 2.0), "asymmetric"),
])
def test_resize_bilinear_against_ort(tmp_path, shape, scales, ctm):
    """Bilinear Resize keeps each source row's interpolated columns for the next output rows
    (resize.c): upsampled, downsampled and unequal scales, maps larger than one block of rows
    and one chunk of columns."""
    rng = np.random.default_rng(71)
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear", coordinate_transformation_mode=ctm)
    inits = [helper.make_tensor("scales", F, [4], [1.0, 1.0, *scales])]
    path = tl.onnx_graph_model(tmp_path / "r.onnx", [node], [_vi("x", F, list(shape))], [("y", F)], inits=inits, opset=19)
    model = cuvil.load(tl.compile(path, tmp_path / "r"))
    tl.check_vs_ort(model, path, {"x": rng.standard_normal(shape).astype(np.float32)}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rule", ["linear", "gated", "delta", "gated_delta"])
def test_linear_attention_and_causal_conv_against_reference(tmp_path, rule):
    from onnx.reference import ReferenceEvaluator
    rng = np.random.default_rng(80 + len(rule))
    B, T, hq, hk, dk, dv = 2, 5, 4, 2, 3, 2
    names = ["q", "k", "v", "past"] + (["decay"] if "gated" in rule else [""]) + (["beta"] if "delta" in rule else [])
    nodes = [helper.make_node("LinearAttention", names, ["y", "state"], q_num_heads=hq, kv_num_heads=hk, update_rule=rule),
             helper.make_node("CausalConvWithState", ["x", "w", "b", "cpast"], ["cy", "cstate"], activation="silu")]
    shapes = {"q": [B, T, hq * dk], "k": [B, T, hk * dk], "v": [B, T, hk * dv], "past": [B, hk, dk, dv],
              "decay": [B, T, hk * dk], "beta": [B, T, 1], "x": [B, 3, T], "w": [3, 1, 4], "b": [3], "cpast": [B, 3, 3]}
    used = [n for n in names if n] + ["x", "w", "b", "cpast"]
    path = tl.onnx_graph_model(tmp_path / "la.onnx", nodes, [_vi(n, F, shapes[n]) for n in used],
                               [("y", F), ("state", F), ("cy", F), ("cstate", F)], opset=27)
    feeds = {n: rng.standard_normal(shapes[n]).astype(np.float32) * (0.3 if n == "decay" else 1) for n in used}
    got = cuvil.load(tl.compile(path, tmp_path / "la"))(**feeds)
    want = ReferenceEvaluator(str(path)).run(None, feeds)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def _declared(path, dims):
    import onnx
    m = onnx.load(path)
    del m.graph.output[0].type.tensor_type.shape.dim[:]
    for d in dims:
        m.graph.output[0].type.tensor_type.shape.dim.add().dim_value = d
    onnx.save(m, path)
    return path


@pytest.mark.parametrize("case", ["col2im_batch", "col2im_blocks", "ccp_other_dim", "stft_window", "einsum_huge",
                                  "pool_huge"])
def test_shape_inputs_refused_when_inconsistent(tmp_path, case):
    i64 = TensorProto.INT64
    if case == "col2im_batch":   # the declared batch must be the input's
        node = helper.make_node("Col2Im", ["x", "img", "blk"], ["y"])
        vis = [_vi("x", F, [1, 4, 9]), _vi("img", i64, [2])]
        inits = [helper.make_tensor("blk", i64, [2], [2, 2])]
        dims, msg = [2, 1, 4, 4], "batch"
    elif case == "col2im_blocks":   # constant shapes: the columns must be the image's blocks
        node = helper.make_node("Col2Im", ["x", "img", "blk"], ["y"])
        vis = [_vi("x", F, [1, 4, 7])]
        inits = [helper.make_tensor("img", i64, [2], [4, 4]), helper.make_tensor("blk", i64, [2], [2, 2])]
        dims, msg = None, "blocks"
    elif case == "ccp_other_dim":   # a dim not in axes must keep its size
        node = helper.make_node("CenterCropPad", ["x", "shape"], ["y"], axes=[1])
        vis, inits = [_vi("x", F, [4, 6]), _vi("shape", i64, [1])], []
        dims, msg = [10, 3], "not in axes"
    elif case == "stft_window":   # a window of another length than the frames
        node = helper.make_node("STFT", ["s", "step", "w", "len"], ["y"])
        vis = [_vi("s", F, [1, 64, 1]), _vi("w", F, [10])]
        inits = [helper.make_tensor("step", i64, [], [4]), helper.make_tensor("len", i64, [], [16])]
        dims, msg = None, "window"
    elif case == "einsum_huge":
        node = helper.make_node("Einsum", ["a", "b", "c", "d"], ["y"], equation="a,b,c,d->")
        vis, inits = [_vi(n, F, [65536]) for n in "abcd"], []
        dims, msg = None, "2^40"
    else:
        node = helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[200, 200, 200], pads=[199] * 6)
        vis, inits = [_vi("x", F, [1, 1, 60, 60, 60])], []
        dims, msg = None, "2^40"
    path = tl.onnx_graph_model(tmp_path / "m.onnx", [node], vis, [("y", F)], inits=inits, opset=18 if case != "stft_window"
                               else 17)
    if dims:
        _declared(path, dims)
    tl.assert_clean_failure(tl.compile_raw(path, tmp_path / "m.so"), mentions=[msg])
