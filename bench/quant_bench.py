#!/usr/bin/env python3
"""int8 models against ONNX Runtime's int8 run of the same file, and against Cuvil's float32.

Builds torchvision ResNet-50 and MobileNetV2 (seeded random weights, 1x3x224x224), quantizes each
with onnxruntime.quantization.quantize_static (QDQ, int8 per-channel weights, int8 activations,
8 calibration inputs of N(0, 1)), and BERT-base (transformers, seeded, 1x128 tokens) with
quantize_dynamic (`--models bert_base`), and ddddocr's captcha model from its PyPI wheel
(`--models ddddocr`: ConvInteger and a DynamicQuantizeLSTM, no float32 file), compiles the
int8 and the float32 file with cuvil-compile for each target this machine runs, and times them in rounds that alternate Cuvil and ONNX Runtime,
each round in its own process (bench/peer_run.py), reporting medians over all rounds.

    $VENV/bin/python bench/quant_bench.py [--models resnet50,mobilenet_v2,bert_base,ddddocr] [--rounds 5] [--iters 20]
        [--threads 1,2] [--targets x86_64-avx512,x86_64-avx2] [--work DIR]

Each row names its target and, for x86_64-avx2, the integer microkernel: the best this CPU runs
and "6x16__avx2w" (CUVIL_QGEMM_UKERNEL), what an AVX2 CPU without VNNI runs (6x16__avx2ub in its
place on a MatMul's weights packed pair-split). ONNX Runtime picks
its own kernels for this CPU in those rows. Where the kernel lets CPUID fault (cpuid_fault in
/proc/cpuinfo) on an AVX-512 CPU, a third x86_64-avx2 row, "AVX2-only CPU", runs both Cuvil and
ONNX Runtime under bench/cpuid_mask.c, which hides AVX-512 and every VNNI from CPUID: each picks
the kernels it would pick on an AVX2-only CPU (AMD Zen 2/3). A benchmark, not a test.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from bench import cpuid_mask  # noqa: E402


def build_bert(work, seq=128):
    """BERT-base (transformers' default config, seeded random weights) at 1 x SEQ, quantized by
    quantize_dynamic (DynamicQuantizeLinear + MatMulInteger on every Linear, int8 weights): the
    form ONNX Runtime's documentation gives for transformers. Returns the float32 file, the int8
    one and the .npz feed."""
    f32, q, feed = work / "bert_base.onnx", work / "bert_base_dyn.onnx", work / "bert_feed.npz"
    if q.exists():
        return f32, q, feed
    import torch
    import transformers
    from onnxruntime.quantization import QuantType, quantize_dynamic
    torch.manual_seed(0)
    bert = transformers.BertModel(transformers.BertConfig(attn_implementation="eager")).eval()

    class W(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = bert

        def forward(self, ids, mask):
            return self.m(input_ids=ids, attention_mask=mask).last_hidden_state

    rng = np.random.RandomState(7)
    ids = rng.randint(0, 30522, (1, seq)).astype(np.int64)
    mask = np.ones((1, seq), np.int64)
    np.savez(feed, ids=ids, mask=mask)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(W(), (torch.from_numpy(ids), torch.from_numpy(mask)), str(f32), input_names=["ids", "mask"],
                          output_names=["h"], opset_version=17, dynamo=False)
        quantize_dynamic(str(f32), str(q), weight_type=QuantType.QInt8)
    return f32, q, feed


def build_ddddocr(work, width=160):
    """ddddocr's captcha model (common_old.onnx from the ddddocr 1.6.1 wheel on PyPI, fetched by
    pip): quantize_dynamic's older form, 21 ConvInteger and a bidirectional DynamicQuantizeLSTM,
    input [1, 1, 64, image_width]. Its output's declared shape ([1, seqlen]; it is [seqlen, 1,
    8210]) is cleared, as Cuvil refuses it. No float32 file. Returns (None, the model, the input)."""
    q, x = work / "ddddocr_old.onnx", work / f"ddddocr_x{width}.npy"
    if not q.exists():
        import zipfile
        import onnx
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "ddddocr==1.6.1", "-d", str(work)], check=True,
                       capture_output=True)
        with zipfile.ZipFile(next(work.glob("ddddocr-1.6.1-*.whl"))) as z:
            m = onnx.load_from_string(z.read("ddddocr/common_old.onnx"))
        m.graph.output[0].type.tensor_type.ClearField("shape")
        onnx.save(m, str(q))
    np.save(x, np.random.RandomState(3).rand(1, 1, 64, width).astype(np.float32))
    return None, q, x


def build(name, work):
    if name == "bert_base":
        return build_bert(work)[:2]
    if name == "ddddocr":
        return build_ddddocr(work)[:2]
    f32, qdq = work / f"{name}.onnx", work / f"{name}_qdq.onnx"
    if qdq.exists():
        return f32, qdq
    import torch
    import torchvision
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process
    torch.manual_seed(0)
    m = getattr(torchvision.models, name)(weights=None).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (torch.randn(1, 3, 224, 224),), str(f32), input_names=["x"], output_names=["y"],
                          opset_version=17, dynamo=False)
        pre = work / f"{name}_pre.onnx"
        quant_pre_process(str(f32), str(pre))

        class Reader(CalibrationDataReader):
            def __init__(self):
                self.it = iter([{"x": np.random.RandomState(i).randn(1, 3, 224, 224).astype(np.float32)} for i in range(8)])

            def get_next(self):
                return next(self.it, None)

        quantize_static(str(pre), str(qdq), Reader(), quant_format=QuantFormat.QDQ, per_channel=True)
    return f32, qdq


def peer(kind, what, inp, threads, iters, env=None):
    env = dict(env or os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "python")] + [p for p in [env.get("PYTHONPATH")] if p])
    out = subprocess.run([sys.executable, str(REPO / "bench" / "peer_run.py"), kind, str(what), str(inp), str(threads),
                          str(iters)], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet50,mobilenet_v2,bert_base")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--targets", default="x86_64-avx512,x86_64-avx2", help="those of these this machine runs")
    ap.add_argument("--work", default="/tmp/cuvil-quant-bench")
    ap.add_argument("--build", default=os.environ.get("CUVIL_BUILD", str(REPO / "build")))
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    np.save(work / "x.npy", np.random.RandomState(99).randn(1, 3, 224, 224).astype(np.float32))
    sys.path.insert(0, str(REPO / "tests" / "python"))
    import cuvil_testlib as tl
    targets = [t for t in args.targets.split(",") if tl.host_runs(t)]
    mask = cpuid_mask(work)
    print("| model | target | int8 microkernel | threads | Cuvil int8 ms | ORT int8 ms | ratio | Cuvil f32 ms | int8 speed-up |"
          " Cuvil int8 / ORT int8 peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        f32, qdq = build(name, work)
        inp = build_bert(work)[2] if name == "bert_base" else build_ddddocr(work)[2] if name == "ddddocr" else work / "x.npy"
        dims = ["--dim", "image_width=16:512"] if name == "ddddocr" else []
        for t in targets:
            so_q, so_f = work / f"{name}_qdq_{t}.so", work / f"{name}_{t}.so"
            for onnx_path, so in ((qdq, so_q), (f32, so_f)):
                if onnx_path:
                    subprocess.run([str(Path(args.build) / "bin" / "cuvil-compile"), "--model", str(onnx_path), "--output",
                                    str(so), "--target", t] + dims, check=True)
            # (label, Cuvil's environment, ONNX Runtime's environment)
            variants = [("best here", os.environ, os.environ)]
            if t == "x86_64-avx2":
                variants.append(("6x16__avx2w", dict(os.environ, CUVIL_QGEMM_UKERNEL="6x16__avx2w"), os.environ))
                if mask:
                    masked = dict(os.environ, LD_PRELOAD=str(mask))
                    variants.append(("AVX2-only CPU (both)", masked, masked))
            for label, env, ort_env in variants:
                for th in (int(x) for x in args.threads.split(",")):
                    cq, co, cf, rq, ro = [], [], [], [], []
                    for _ in range(args.rounds):   # alternating, each in its own process
                        r = peer("cuvil", so_q, inp, th, args.iters, env)
                        cq += r["times_ms"]
                        rq.append(r["peak_rss_mb"])
                        r = peer("ort", qdq, inp, th, args.iters, ort_env)
                        co += r["times_ms"]
                        ro.append(r["peak_rss_mb"])
                        if f32:
                            cf += peer("cuvil", so_f, inp, th, args.iters, env)["times_ms"]
                    mq, mo = statistics.median(cq), statistics.median(co)
                    f32_cols = f"{statistics.median(cf):.2f} | {statistics.median(cf) / mq:.2f}x" if cf else "- | -"
                    print(f"| {name} | {t} | {label} | {th} | {mq:.2f} | {mo:.2f} | {mq / mo:.2f} | {f32_cols} |"
                          f" {max(rq):.0f} / {max(ro):.0f} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
