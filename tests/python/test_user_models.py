"""Models as users bring them, built here from their published architectures with seeded random
weights and exported by torch.onnx (TorchScript exporter), each against ONNX Runtime:
- a voice-activity detector in the manner of Silero VAD v5: a convolutional STFT, a conv
  encoder, an LSTM whose state the caller carries from one 512-sample chunk to the next, a
  sigmoid head (run over several chunks, the state fed back);
- a CRNN text recogniser: conv/BN/ReLU/pool blocks, a two-layer bidirectional LSTM over the
  columns, a linear CTC head with log-softmax;
- a seq2seq model whose greedy decoder is a scripted loop (an ONNX Loop, its tokens gathered in a
  sequence): an embedding-mean encoder, then steps of embedding, GRU cell, projection and
  ArgMax, each step's token fed back."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import cuvil
import cuvil_testlib as tl

torch = pytest.importorskip("torch")
nn = torch.nn
# whole torch models: the plain pass of make test only (the sanitizer pass's time, CI)
pytestmark = pytest.mark.plain


def _export(module, args, path, names, outs, dynamic=None, opset=17):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, str(path), input_names=names, output_names=outs, opset_version=opset,
                          dynamo=False, dynamic_axes=dynamic)
    return path


class VAD(nn.Module):
    """Silero-VAD-v5-like: STFT as a fixed conv (256-point, hop 128), magnitude, 4 conv blocks,
    an LSTM cell carrying (h, c) as state [2, 1, 128], a 1x1 conv and sigmoid, averaged."""

    def __init__(self):
        super().__init__()
        n = torch.arange(256, dtype=torch.float32)
        k = torch.arange(129, dtype=torch.float32)[:, None]
        win = 0.5 - 0.5 * torch.cos(2 * torch.pi * n / 256)
        basis = torch.cat([torch.cos(2 * torch.pi * k * n / 256), -torch.sin(2 * torch.pi * k * n / 256)]) * win
        self.register_buffer("basis", basis[:, None, :])
        self.enc = nn.Sequential(nn.Conv1d(129, 128, 3, padding=1), nn.ReLU(), nn.Conv1d(128, 64, 3, stride=2, padding=1),
                                 nn.ReLU(), nn.Conv1d(64, 64, 3, stride=2, padding=1), nn.ReLU(),
                                 nn.Conv1d(64, 128, 3, padding=1), nn.ReLU())
        self.rnn = nn.LSTMCell(128, 128)
        self.head = nn.Sequential(nn.ReLU(), nn.Conv1d(128, 1, 1), nn.Sigmoid())

    def forward(self, x, state):
        x = nn.functional.pad(x, (64, 64), mode="reflect").unsqueeze(1)
        spec = nn.functional.conv1d(x, self.basis, stride=128)
        mag = torch.sqrt(spec[:, :129] ** 2 + spec[:, 129:] ** 2)
        feat = self.enc(mag).mean(dim=2)
        h, c = self.rnn(feat, (state[0], state[1]))
        out = self.head(h.unsqueeze(2)).squeeze(1).mean(dim=1, keepdim=True)
        return out, torch.stack([h, c])


def test_vad_with_lstm_state(tmp_path):
    torch.manual_seed(10)
    path = _export(VAD().eval(), (torch.zeros(1, 512), torch.zeros(2, 1, 128)), tmp_path / "vad.onnx",
                   ["input", "state"], ["output", "stateN"])
    model = cuvil.load(tl.compile(path, tmp_path / "vad"))
    import onnxruntime as ort
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(11)
    audio = (np.sin(np.arange(512 * 6) / 9.0) * 0.3 + rng.standard_normal(512 * 6) * 0.05).astype(np.float32)
    s_c = s_o = np.zeros((2, 1, 128), np.float32)
    for i in range(6):   # the state fed back chunk after chunk, by each runtime for itself
        chunk = audio[None, 512 * i: 512 * (i + 1)]
        p_c, s_c = model(input=chunk, state=s_c)
        p_o, s_o = sess.run(None, {"input": chunk, "state": s_o})
        np.testing.assert_allclose(p_c, p_o, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(s_c, s_o, rtol=1e-4, atol=1e-5)


class CRNN(nn.Module):
    def __init__(self, classes=37):
        super().__init__()

        def block(i, o, pool):
            return [nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(), nn.MaxPool2d(pool)]
        self.cnn = nn.Sequential(*block(1, 16, 2), *block(16, 32, 2), *block(32, 48, (2, 1)), *block(48, 64, (4, 1)))
        self.rnn = nn.LSTM(64, 48, num_layers=2, bidirectional=True)
        self.fc = nn.Linear(96, classes)

    def forward(self, x):
        f = self.cnn(x)                      # [B, 64, 1, W/4]
        seq = f.squeeze(2).permute(2, 0, 1)   # [T, B, 64]
        y, _ = self.rnn(seq)
        return self.fc(y).log_softmax(dim=2)   # the CTC head: [T, B, classes]


def test_crnn_text_recogniser(tmp_path):
    torch.manual_seed(12)
    net = CRNN().eval()
    for m in net.modules():   # non-trivial batch-norm statistics
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
    path = _export(net, (torch.zeros(1, 1, 32, 100),), tmp_path / "crnn.onnx", ["image"], ["logprobs"],
                   dynamic={"image": {0: "batch", 3: "width"}, "logprobs": {0: "steps", 1: "batch"}})
    model = cuvil.load(tl.compile(path, tmp_path / "crnn", dims={"batch": "1:4", "width": "8:160"}))
    img = np.random.default_rng(13).random((2, 1, 32, 120)).astype(np.float32)
    tl.check_vs_ort(model, path, {"image": img}, rtol=1e-4, atol=1e-4)


class Seq2Seq(nn.Module):
    """An embedding-mean encoder, then a greedy decoder: a GRU cell (written out: the scripted
    nn.GRUCell does not export), a projection and ArgMax per step, src length + 2 steps."""

    def __init__(self, vocab=20, hidden=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, hidden)
        self.enc = nn.Linear(hidden, hidden)
        self.wx = nn.Linear(hidden, 3 * hidden)
        self.wh = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, src):
        h = torch.tanh(self.enc(self.emb(src).sum(1) / src.shape[1]))
        tok = torch.zeros_like(src[:, 0])   # the start token
        outs: list[torch.Tensor] = []
        for step in range(src.shape[1] + 2):   # a trip count from the input: an ONNX Loop
            gx, gh = self.wx(self.emb(tok)).chunk(3, 1), self.wh(h).chunk(3, 1)
            r, z = torch.sigmoid(gx[0] + gh[0]), torch.sigmoid(gx[1] + gh[1])
            h = (1 - z) * torch.tanh(gx[2] + r * gh[2]) + z * h
            tok = self.out(h).argmax(dim=1)
            outs.append(tok)
        return torch.stack(outs, dim=1)


def test_seq2seq_loop_greedy_decoder(tmp_path):
    torch.manual_seed(14)
    net = torch.jit.script(Seq2Seq().eval())
    path = _export(net, (torch.zeros(2, 5, dtype=torch.long),), tmp_path / "s2s.onnx", ["src"], ["tokens"])
    import onnx
    assert any(n.op_type == "Loop" for n in onnx.load(path).graph.node)   # the decoder stayed a loop
    model = cuvil.load(tl.compile(path, tmp_path / "s2s"))
    src = np.random.default_rng(15).integers(0, 20, (2, 5)).astype(np.int64)
    tl.check_vs_ort(model, path, {"src": src}, rtol=0, atol=0)
