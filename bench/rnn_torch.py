#!/usr/bin/python3
"""PyTorch baseline for shoal's char-RNN (examples/char-rnn/char_rnn.conf).

It trains the same model - embedding, torch.nn.GRU or LSTM (batch_first,
stacked, dropout between levels), a linear layer over every step,
softmax cross-entropy, Adam with gradient clipping by norm - on the same
data: the files `shoal import text` read, cut the same way (vocabulary of
the bytes present in increasing order, the last --val-fraction as
validation, sequences of seq_len + 1 ids overlapping by one, batch_size
streams of consecutive sequences per batch, the hidden state carried from
batch to batch and detached: truncated BPTT).  It prints one line that
bench/rnn.sh parses:

  samples_per_sec=41.2 val_loss=2.0345 steps=100 ...

samples_per_sec is the median over windows of --window steps (shoal's
disp_freq windows); val_loss the mean loss per byte over the whole
validation set after the last step (shoal's test pass at the end).
Hyper-parameters come from the conf; flags override.  The thread
environment is set before torch is imported.
"""

import argparse
import configparser
import glob
import os
import statistics
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--conf", default="examples/char-rnn/char_rnn.conf")
    p.add_argument("--files", default="/usr/lib/python3.11/*.py", help="glob, sorted bytewise")
    p.add_argument("--seq-len", type=int, default=100)
    p.add_argument("--val-fraction", type=float, default=0.05)
    p.add_argument("--cell", choices=("gru", "lstm"), help="default: the conf's")
    p.add_argument("--hidden", type=int)
    p.add_argument("--layers", type=int)
    p.add_argument("--batch", type=int)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--window", type=int, default=10)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-eval", action="store_true")
    p.add_argument("--device", default="cpu", help="cpu or cuda:N (data and model on the device)")
    p.add_argument("--tf32", action="store_true", help="on a GPU: allow TF32 (default FP32, as shoal)")
    p.add_argument("--init-from", metavar="FILE",
                   help="start from these weights: a shoal params blob (see bench/rnn.sh), so that "
                        "both sides train from the same initial values")
    return p.parse_args()


def read_shoal_params(path):
    """{name: (shape, list of floats)} of a shoal params blob (shoal/param.h)."""
    import struct
    data = open(path, "rb").read()
    pos = 0
    if data[:8] == b"SHOALPRM":
        pos = 16
    out = {}
    while pos < len(data):
        (nlen,) = struct.unpack_from("<I", data, pos); pos += 4
        name = data[pos:pos + nlen].decode(); pos += nlen
        (ndim,) = struct.unpack_from("<I", data, pos); pos += 4
        shape = struct.unpack_from("<%di" % ndim, data, pos); pos += 4 * ndim
        (count,) = struct.unpack_from("<Q", data, pos); pos += 8
        out[name] = (shape, struct.unpack_from("<%df" % count, data, pos)); pos += 4 * count
    return out


def conf_values(path):
    c = configparser.ConfigParser(inline_comment_prefixes=("#",))
    c.read(path)
    rnn = next(s for s in c.sections() if c[s].get("type") in ("gru", "lstm"))
    g = lambda sec, key, default: c[sec].get(key, default) if sec in c else default
    return {
        "cell": c[rnn]["type"], "hidden": int(c[rnn]["hidden_size"]),
        "layers": int(c[rnn].get("num_layers", "1")), "dropout": float(c[rnn].get("dropout", "0")),
        "embed": int(c["layer embed"]["embedding_dim"]), "batch": int(c["layer data"]["batch_size"]),
        "lr": float(g("updater", "lr", "0.01")), "clip": float(g("updater", "clip_norm", "0")),
        "updater": g("updater", "type", "sgd"),
    }


def main():
    a = parse_args()
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    os.environ["OPENBLAS_NUM_THREADS"] = str(a.threads)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    v = conf_values(a.conf)
    for key in ("cell", "hidden", "layers", "batch"):
        if getattr(a, key) is not None:
            v[key] = getattr(a, key)

    text = b"".join(open(f, "rb").read() for f in sorted(glob.glob(a.files)))
    vocab = sorted(set(text))
    ids = bytes(vocab.index(b) for b in range(256) if b in vocab)  # unused; keeps vocab order explicit
    lut = {b: i for i, b in enumerate(vocab)}
    data = torch.tensor([lut[b] for b in text], dtype=torch.long)
    n_val = int(a.val_fraction * len(data))
    train, val = data[: len(data) - n_val], data[len(data) - n_val:]
    T = a.seq_len

    def sequences(part):
        n = (len(part) - 1) // T
        return torch.stack([part[i * T: i * T + T + 1] for i in range(n)])

    def streams(seqs, rows):
        length = len(seqs) // rows
        return seqs[: rows * length].view(rows, length, T + 1), length

    tr, tr_len = streams(sequences(train), v["batch"])
    vs = sequences(val)
    va, va_len = streams(vs, min(v["batch"], len(vs)))
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    if cuda:
        torch.backends.cudnn.allow_tf32 = a.tf32
        torch.backends.cuda.matmul.allow_tf32 = a.tf32
        tr, va = tr.to(dev), va.to(dev)

    V = len(vocab)
    rnn_cls = torch.nn.GRU if v["cell"] == "gru" else torch.nn.LSTM

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(V, v["embed"])
            self.rnn = rnn_cls(v["embed"], v["hidden"], v["layers"], batch_first=True,
                               dropout=v["dropout"] if v["layers"] > 1 else 0.0)
            self.out = torch.nn.Linear(v["hidden"], V)

        def forward(self, x, h):
            y, h = self.rnn(self.embed(x), h)
            return self.out(y), h

    model = Model().to(dev)
    if a.init_from:
        blob = read_shoal_params(a.init_from)
        names = {"embed.weight": "embed/weight", "out.weight": "logits/weight", "out.bias": "logits/bias"}
        with torch.no_grad():
            for name, prm in model.named_parameters():
                key = names.get(name) or "gru/" + name.split(".", 1)[1]
                shape, values = blob[key]
                prm.copy_(torch.tensor(values, dtype=torch.float32).reshape(shape))
    opt = (torch.optim.Adam(model.parameters(), lr=v["lr"]) if v["updater"] == "adam"
           else torch.optim.SGD(model.parameters(), lr=v["lr"]))
    loss_fn = torch.nn.CrossEntropyLoss()

    def detach(h):
        return None if h is None else (tuple(x.detach() for x in h) if isinstance(h, tuple) else h.detach())

    h = None
    rates, t_window, pos = [], None, 0
    total = a.warmup + a.steps
    for step in range(total):
        if step == a.warmup:
            if cuda:
                torch.cuda.synchronize(dev)
            t_window = time.perf_counter()
        if pos == 0:
            h = None  # every stream restarts: fresh state
        batch = tr[:, pos]
        pos = (pos + 1) % tr_len
        x, y = batch[:, :-1], batch[:, 1:]
        model.train()
        logits, h = model(x, detach(h))
        loss = loss_fn(logits.reshape(-1, V), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        if v["clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), v["clip"])
        opt.step()
        if step >= a.warmup and (step - a.warmup + 1) % a.window == 0:
            if cuda:
                torch.cuda.synchronize(dev)
            now = time.perf_counter()
            rates.append(a.window * v["batch"] / (now - t_window))
            t_window = now

    val_loss = float("nan")
    if not a.no_eval:
        model.eval()
        hv, tot, cnt = None, 0.0, 0
        with torch.no_grad():
            for j in range(va_len):
                batch = va[:, j]
                logits, hv = model(batch[:, :-1], hv)
                tot += float(loss_fn(logits.reshape(-1, V), batch[:, 1:].reshape(-1))) * batch.shape[0]
                cnt += batch.shape[0]
        val_loss = tot / cnt
    if cuda:
        # bench/gpu.sh's line
        print(f"gpu_torch samples_per_sec={statistics.median(rates):.1f} "
              f"step_ms={1000 * v['batch'] / statistics.median(rates):.3f} final_loss={float(loss):.4f} "
              f"cell={v['cell']} tf32={int(a.tf32)} device=\"{torch.cuda.get_device_name(dev)}\"")
    print(f"samples_per_sec={statistics.median(rates):.2f} val_loss={val_loss:.4f} steps={a.steps} "
          f"cell={v['cell']} hidden={v['hidden']} layers={v['layers']} batch={v['batch']} threads={a.threads} "
          f"torch={torch.__version__}")
    del ids


if __name__ == "__main__":
    sys.exit(main())
