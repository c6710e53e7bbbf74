#!/usr/bin/env python3
"""PyTorch on a GPU, the baseline of bench/gpu.sh.

Trains the model of examples/fashion-mnist/<model>.conf (the architecture,
hyper-parameters and input normalisation of bench/torch_train.py, imported
from it) on a CUDA device: every batch goes up from host memory as bytes
and is normalised on the device, as shoal's lmdb_input uploads a batch
per step.  Prints one line that bench/gpu.sh parses:

  gpu_torch samples_per_sec=... mean_samples_per_sec=... step_ms=...
    final_loss=... device="NVIDIA H100 80GB HBM3" tf32=0 ...

FP32 throughout by default (TF32 off for cuDNN and matmul), as shoal's
default; --tf32 allows it on both (shoal: [job] precision = tf32);
--bf16 runs the forward and the loss under torch.autocast(bfloat16)
with FP32 weights and optimiser (shoal: [job] precision = bf16), TF32
allowed for what stays FP32 as in shoal.  --batch changes the conf's
batch size (shoal: -o "layer data.batch_size=N").
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_train as tt  # noqa: E402  (same models and hyper-parameters)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=("mlp", "cnn"), default="mlp")
    p.add_argument("--data", default=tt.FMNIST, help="directory with the IDX .gz files")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--window", type=int, default=25)
    p.add_argument("--tf32", action="store_true")
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--batch", type=int)
    args = p.parse_args()

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    hp_args = argparse.Namespace(model=args.model, conf=None, batch_size=args.batch, lr=None, momentum=None,
                                 weight_decay=None, scale=None, mean=None, std=None)
    hp, hp_log = tt.hyper_params(hp_args)
    print("hyper-parameters: " + " ".join(hp_log), file=sys.stderr)
    torch.backends.cudnn.allow_tf32 = args.tf32 or args.bf16
    torch.backends.cuda.matmul.allow_tf32 = args.tf32 or args.bf16
    dev = torch.device(args.device)
    torch.manual_seed(0)
    x, y = tt.load(torch, args.data, "train", args.model)
    x, y = x.pin_memory(), y.pin_memory()
    net = tt.build(nn, args.model).to(dev)
    lr_at = tt.lr_schedule(hp)
    opt = torch.optim.SGD(net.parameters(), lr=lr_at(0), momentum=hp["momentum"],
                          weight_decay=hp["weight_decay"])
    bs = hp["batch_size"]
    nbatches = x.shape[0] // bs

    net.train()
    marks, t0, loss = [], None, None
    for step in range(args.warmup + args.steps):
        if step == args.warmup or (step > args.warmup and (step - args.warmup) % args.window == 0):
            torch.cuda.synchronize(dev)
            marks.append(time.perf_counter())
            t0 = t0 or marks[-1]
        i = (step % nbatches) * bs
        xb = x[i:i + bs].to(dev, non_blocking=True)
        yb = y[i:i + bs].to(dev, non_blocking=True)
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.bf16):
            loss = F.cross_entropy(net(tt.batch(xb, 0, bs, hp)), yb)
        loss.backward()
        opt.step()
    torch.cuda.synchronize(dev)
    end = time.perf_counter()
    if args.steps % args.window == 0:
        marks.append(end)
    rates = [args.window * bs / (b - a) for a, b in zip(marks, marks[1:])]
    mean = args.steps * bs / (end - t0)
    name = torch.cuda.get_device_name(dev)
    print(f"gpu_torch samples_per_sec={statistics.median(rates) if rates else mean:.1f} "
          f"mean_samples_per_sec={mean:.1f} step_ms={1000 * (end - t0) / args.steps:.3f} "
          f"final_loss={loss.item():.4f} batch={bs} steps={args.steps} model={args.model} "
          f"tf32={int(args.tf32)} bf16={int(args.bf16)} torch={torch.__version__} cudnn={torch.backends.cudnn.version()} "
          f'device="{name}"')


if __name__ == "__main__":
    main()
