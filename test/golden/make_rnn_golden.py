#!/usr/bin/python3
"""Golden dumps for test/test_recurrent.c: torch.nn.GRU and torch.nn.LSTM
(batch_first, 2 levels, non-zero initial states) on fixed inputs.

Run once from the repository root with Debian's python3-torch:
    /usr/bin/python3 test/golden/make_rnn_golden.py
It writes test/golden/rnn_gru.txt and rnn_lstm.txt, committed with this
script; the C test reads them and needs no torch.  Each file holds one
tensor per line:  NAME NDIM DIM... VALUE...  (values as %.9g, row-major):
the input x, the initial states h0 (and c0), every parameter by its
state-dict name, the output gradient dy, and torch's results y, h_n
(c_n), dx and every parameter's gradient (grad_<name>) for the loss
sum(y * dy).
"""

import torch

B, T, I, H, L = 3, 4, 5, 6, 2


def dump(f, name, t):
    t = t.detach().contiguous()
    vals = " ".join(f"{v:.9g}" for v in t.reshape(-1).tolist())
    f.write(f"{name} {t.dim()} {' '.join(str(d) for d in t.shape)} {vals}\n")


def make(cell, path, seed):
    torch.manual_seed(seed)
    cls = torch.nn.GRU if cell == "gru" else torch.nn.LSTM
    rnn = cls(I, H, L, batch_first=True)
    x = torch.randn(B, T, I, requires_grad=True)
    h0 = 0.5 * torch.randn(L, B, H)
    c0 = 0.5 * torch.randn(L, B, H)
    dy = torch.randn(B, T, H)
    if cell == "gru":
        y, hn = rnn(x, h0)
    else:
        y, (hn, cn) = rnn(x, (h0, c0))
    (y * dy).sum().backward()
    with open(path, "w") as f:
        f.write(f"# torch {torch.__version__} nn.{cls.__name__}({I}, {H}, {L}, batch_first=True), "
                f"made by test/golden/make_rnn_golden.py\n")
        dump(f, "x", x)
        dump(f, "h0", h0)
        if cell == "lstm":
            dump(f, "c0", c0)
        for name, p in rnn.named_parameters():
            dump(f, name, p)
        dump(f, "dy", dy)
        dump(f, "y", y)
        dump(f, "h_n", hn)
        if cell == "lstm":
            dump(f, "c_n", cn)
        dump(f, "dx", x.grad)
        for name, p in rnn.named_parameters():
            dump(f, "grad_" + name, p.grad)


make("gru", "test/golden/rnn_gru.txt", 1)
make("lstm", "test/golden/rnn_lstm.txt", 2)
