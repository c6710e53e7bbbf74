#!/usr/bin/python3
"""PyTorch baseline for shoal's Fashion-MNIST benchmarks.

It trains the same model as examples/fashion-mnist/<model>.conf, on the
same data (the IDX files that `shoal import idx` reads, pixels normalised
as the conf's input layer does), at the same batch size and with the same
thread budget, and prints one machine-readable line that bench/run.sh
parses:

  samples_per_sec=8900.1 mean_samples_per_sec=8700.3 peak_rss_mib=320 ...

samples_per_sec is the median over windows of --window steps, as shoal's
metrics.jsonl gives one rate per disp_freq steps; mean_samples_per_sec is
over the whole timed run.

Hyper-parameters (batch size, momentum, weight decay, the lr schedule,
input scale/mean/std) are read from the shoal conf when it exists, so the
two sides stay in sync; command-line flags override them.

The thread environment is set before torch (and with it libgomp and
OpenBLAS) is loaded: both read their settings once, at load time.  Run it
with /usr/bin/python3 (Debian's python3-torch).
"""

import argparse
import gzip
import os
import re
import resource
import statistics
import struct
import sys
import time

FMNIST = "/usr/share/datasets/fashion-mnist"

# Without a conf: the example's usual values.  A conf that leaves a key out
# gets shoal's default for it (src/job/job.c, src/layers/lmdb_input.c).
DEFAULTS = {"batch_size": 64, "lr": 0.05, "momentum": 0.9, "weight_decay": 0.0,
            "scale": 1 / 255, "mean": 0.0, "std": 1.0}
SHOAL_DEFAULTS = dict(DEFAULTS, lr=0.01, momentum=0.0)
# shoal's [updater] schedule keys and their defaults (src/job/job.c).
SCHEDULE = {"lr_policy": "fixed", "gamma": "0.1", "power": "0.75", "step_size": "1000",
            "step_list": "", "lr_list": "", "warmup_steps": "0"}
DATA_KEYS = ("batch_size", "scale", "mean", "std")   # keys of the input layer


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=("mlp", "cnn", "deep"), default="mlp",
                   help="mlp, cnn, or deep (SINGA's 784-2500-2000-1500-1000-500-10 STanh MLP)")
    p.add_argument("--threads", type=int, default=1,
                   help="cores the run may use (OpenBLAS threads)")
    p.add_argument("--mode", choices=("omp", "blas"), default="omp",
                   help="omp: torch.set_num_threads(N), passive OpenMP, OpenBLAS N; "
                        "blas: torch 1 thread, OpenBLAS N")
    p.add_argument("--steps", type=int, default=500, help="timed steps")
    p.add_argument("--warmup", type=int, default=50, help="untimed steps first")
    p.add_argument("--window", type=int, default=25,
                   help="steps per rate sample (match shoal's job.disp_freq)")
    p.add_argument("--conf", help="shoal conf to take hyper-parameters from "
                                  "(default examples/fashion-mnist/<model>.conf)")
    p.add_argument("--batch-size", type=int)
    p.add_argument("--lr", type=float, help="base lr (a fixed_step schedule uses its lr_list)")
    p.add_argument("--momentum", type=float)
    p.add_argument("--weight-decay", type=float)
    p.add_argument("--scale", type=float, help="input value = (byte * scale - mean) / std")
    p.add_argument("--mean", type=float)
    p.add_argument("--std", type=float)
    p.add_argument("--data", default=FMNIST, help="directory with the IDX .gz files")
    p.add_argument("--eval", action="store_true",
                   help="report test accuracy after training (not timed)")
    args = p.parse_args()
    if args.threads < 1 or args.steps < 1 or args.warmup < 0 or args.window < 1:
        p.error("--threads, --steps and --window must be positive, --warmup not negative")
    return args


def read_keyfile(path):
    """Minimal GKeyFile reader: {group: {key: value}}, comments dropped."""
    groups, cur = {}, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            m = re.match(r"^\[(.+)\]$", line)
            if m:
                cur = groups.setdefault(m.group(1).strip(), {})
            elif "=" in line and cur is not None:
                k, v = line.split("=", 1)
                cur[k.strip()] = v.strip()
    return groups


def hyper_params(args):
    """Batch size, lr, momentum, weight decay, input normalisation:
    flag > conf > default; plus the lr schedule (conf only, under
    "schedule").  Returns (dict, list of 'key=value(source)' for the log)."""
    hp, src = dict(DEFAULTS), {k: "default" for k in DEFAULTS}
    hp["schedule"] = dict(SCHEDULE)
    conf = args.conf or os.path.join("examples", "fashion-mnist", args.model + ".conf")
    if os.path.exists(conf):
        hp.update(SHOAL_DEFAULTS)
        src = {k: "shoal default" for k in DEFAULTS}
        groups = read_keyfile(conf)
        upd = groups.get("updater", {})
        kind = upd.get("type", upd.get("kind", "sgd"))
        if kind != "sgd":
            print(f"warning: {conf} uses updater '{kind}', the baseline runs SGD+momentum",
                  file=sys.stderr)
        hp["schedule"].update({k: v for k, v in upd.items() if k in SCHEDULE})
        for key, names in (("lr", ("lr", "base_lr", "learning_rate")),
                           ("momentum", ("momentum",)),
                           ("weight_decay", ("weight_decay",))):
            for n in names:
                if n in upd:
                    hp[key], src[key] = float(upd[n]), "conf"
                    break
        for g in groups.values():   # the input layer: the one with batch_size
            if "batch_size" in g:
                for key in DATA_KEYS:
                    if key in g:
                        hp[key], src[key] = float(g[key]), "conf"
                hp["batch_size"] = int(hp["batch_size"])
                break
        check_architecture(groups, args.model, conf)
    for key in DEFAULTS:
        flag = getattr(args, key)
        if flag is not None:
            hp[key], src[key] = flag, "flag"
    log = [f"{k}={hp[k]}({src[k]})" for k in DEFAULTS]
    return hp, log + [f"{k}={v}" for k, v in hp["schedule"].items() if v != SCHEDULE[k]]


def lr_schedule(hp):
    """lr at a 0-based step, as shoal_lr_at computes it (src/core/updater.c)."""
    s, lr = hp["schedule"], hp["lr"]
    policy, gamma, power = s["lr_policy"], float(s["gamma"]), float(s["power"])
    step_size = max(int(s["step_size"]), 1)
    warm = int(s["warmup_steps"])
    steps = [int(v) for v in s["step_list"].split(",") if v.strip()]
    lrs = [float(v) for v in s["lr_list"].split(",") if v.strip()]
    if policy not in ("fixed", "step", "fixed_step", "exponential", "inverse"):
        raise SystemExit(f"unknown lr_policy '{policy}'")

    def at(step):
        r = lr
        if policy == "step":
            r = lr * gamma ** (step // step_size)
        elif policy == "fixed_step" and lrs:
            i = 0
            while i + 1 < min(len(steps), len(lrs)) and steps[i + 1] <= step:
                i += 1
            r = lrs[i]
        elif policy == "exponential":
            r = lr * gamma ** (step / step_size)
        elif policy == "inverse":
            r = lr * (1 + gamma * step) ** -power
        if step < warm:
            r *= (step + 1) / warm
        return r
    return at


def check_architecture(groups, model, conf):
    """Warns when the conf's layer widths differ from the model built here."""
    want = {"mlp": [1024, 1024, 10], "cnn": [20, 50, 500, 10],
            "deep": [2500, 2000, 1500, 1000, 500, 10]}[model]
    got = []
    for name, g in groups.items():
        if name.startswith("layer ") and "num_output" in g:
            got.append(int(g["num_output"]))
        elif name.startswith("layer ") and "num_filters" in g:
            got.append(int(g["num_filters"]))
    if got and got != want:
        print(f"warning: {conf} has layer widths {got}, the baseline builds {want}",
              file=sys.stderr)


def set_thread_env(args):
    n = args.threads
    torch_threads = n if args.mode == "omp" else 1
    os.environ["OPENBLAS_NUM_THREADS"] = str(n)
    os.environ["OMP_NUM_THREADS"] = str(torch_threads)
    # A spinning OpenMP pool next to OpenBLAS's pool on 2 cores runs 2.4x slower.
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    return torch_threads


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack(">I", data[:4])[0]
    ndim = magic & 0xFF
    if magic >> 8 != 0x08:
        raise SystemExit(f"{path}: not an unsigned-byte IDX file (magic {magic:#x})")
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    import numpy as np
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(torch, data_dir, split, model):
    prefix = "train" if split == "train" else "t10k"
    x = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    # Bytes, normalised per batch as shoal's input layer decodes its
    # records: the run neither gets free preprocessing nor holds 188 MB of
    # floats.
    xs = torch.from_numpy(x.copy())
    xs = xs.reshape(-1, 784) if model != "cnn" else xs.reshape(-1, 1, 28, 28)
    return xs, torch.from_numpy(y.astype("int64"))


def batch(x, i, n, hp):
    return x[i:i + n].float().mul_(hp["scale"] / hp["std"]).sub_(hp["mean"] / hp["std"])


def build(nn, model):
    if model == "deep":
        import torch

        class STanh(nn.Module):
            """shoal's stanh: 1.7159 tanh(2x/3) (LeCun)."""
            def forward(self, x):
                return 1.7159 * torch.tanh(x * (2.0 / 3.0))
        widths = [784, 2500, 2000, 1500, 1000, 500]
        layers = []
        for a, b in zip(widths, widths[1:]):
            layers += [nn.Linear(a, b), STanh()]
        return nn.Sequential(*layers, nn.Linear(500, 10))
    if model == "mlp":
        return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(),
                             nn.Linear(1024, 1024), nn.ReLU(),
                             nn.Linear(1024, 10))
    return nn.Sequential(nn.Conv2d(1, 20, 5), nn.MaxPool2d(2),
                         nn.Conv2d(20, 50, 5), nn.MaxPool2d(2),
                         nn.Flatten(),
                         nn.Linear(50 * 4 * 4, 500), nn.ReLU(),
                         nn.Linear(500, 10))


def main():
    args = parse_args()
    hp, hp_log = hyper_params(args)
    print("hyper-parameters: " + " ".join(hp_log), file=sys.stderr)
    torch_threads = set_thread_env(args)

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(torch_threads)
    torch.manual_seed(0)
    x, y = load(torch, args.data, "train", args.model)
    net = build(nn, args.model)
    lr_at = lr_schedule(hp)
    opt = torch.optim.SGD(net.parameters(), lr=lr_at(0), momentum=hp["momentum"],
                          weight_decay=hp["weight_decay"])
    bs = hp["batch_size"]
    nbatches = x.shape[0] // bs     # full batches only, in file order like shoal's reader

    net.train()
    loss = None
    t0 = None
    marks = []   # time at every window end
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            t0 = time.perf_counter()
            marks.append(t0)
        elif step > args.warmup and (step - args.warmup) % args.window == 0:
            marks.append(time.perf_counter())
        i = (step % nbatches) * bs
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(net(batch(x, i, bs, hp)), y[i:i + bs])
        loss.backward()
        opt.step()
    end = time.perf_counter()
    final_loss = loss.item()
    elapsed = end - t0
    if args.steps % args.window == 0:
        marks.append(end)
    # A trailing partial window is left out; too few steps for one window: the mean.
    rates = [args.window * bs / (b - a) for a, b in zip(marks, marks[1:])]
    mean = args.steps * bs / elapsed

    fields = [f"samples_per_sec={statistics.median(rates) if rates else mean:.1f}",
              f"mean_samples_per_sec={mean:.1f}",
              f"peak_rss_mib={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}",
              f"model={args.model}", f"mode={args.mode}",
              f"torch_threads={torch.get_num_threads()}",
              f"blas_threads={os.environ['OPENBLAS_NUM_THREADS']}",
              f"steps={args.steps}", f"warmup={args.warmup}", f"window={args.window}",
              f"step_ms={1000 * elapsed / args.steps:.3f}",
              f"final_loss={final_loss:.4f}"]
    if args.eval:
        xt, yt = load(torch, args.data, "test", args.model)
        net.eval()
        correct = 0
        with torch.no_grad():
            for i in range(0, xt.shape[0], 1000):
                correct += (net(batch(xt, i, 1000, hp)).argmax(1) == yt[i:i + 1000]).sum().item()
        fields.append(f"test_accuracy={correct / xt.shape[0]:.4f}")
    print(" ".join(fields))


if __name__ == "__main__":
    main()
