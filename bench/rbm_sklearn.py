#!/usr/bin/python3
"""scikit-learn's BernoulliRBM on Fashion-MNIST, the baseline of bench/rbm.sh.

It trains sklearn.neural_network.BernoulliRBM (persistent contrastive
divergence, Gibbs sampling of the visible units) on the 60,000 training
images (pixels / 255, as shoal's lmdb_input scales them) with the given
hidden units, learning rate, batch size and epochs, and prints one line:

  sec_per_epoch=2.31 recon_error=31.2 pseudo_likelihood=-98.1 ...

recon_error is shoal's reconstruction error on the 10,000 test images:
per image, the squared distance between v and sigmoid(sigmoid(v W^T + c)
W + b), summed over pixels, mean over images (rbm_hidden's loss).
Threads: OPENBLAS_NUM_THREADS / OMP_NUM_THREADS = --threads, set before
numpy is imported.
"""

import argparse
import gzip
import os
import struct
import sys
import time

FMNIST = "/usr/share/datasets/fashion-mnist"


def images(name):
    with gzip.open(os.path.join(FMNIST, name), "rb") as f:
        magic, n, rows, cols = struct.unpack(">IIII", f.read(16))
        assert magic == 0x803
        return f.read(n * rows * cols), n, rows * cols


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    os.environ["OPENBLAS_NUM_THREADS"] = str(a.threads)
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    import numpy as np
    from sklearn.neural_network import BernoulliRBM

    raw, n, d = images("train-images-idx3-ubyte.gz")
    x = np.frombuffer(raw, dtype=np.uint8).reshape(n, d).astype(np.float32) / 255.0
    raw, nt, _ = images("t10k-images-idx3-ubyte.gz")
    xt = np.frombuffer(raw, dtype=np.uint8).reshape(nt, d).astype(np.float32) / 255.0

    rbm = BernoulliRBM(n_components=a.hidden, learning_rate=a.lr, batch_size=a.batch, n_iter=a.epochs,
                       random_state=a.seed, verbose=0)
    t0 = time.perf_counter()
    rbm.fit(x)
    secs = time.perf_counter() - t0

    def sig(z):
        return 1.0 / (1.0 + np.exp(-z))

    w, c, b = rbm.components_, rbm.intercept_hidden_, rbm.intercept_visible_
    recon = sig(sig(xt @ w.T + c) @ w + b)
    err = float(((xt - recon) ** 2).sum(axis=1).mean())
    pl = float(rbm.score_samples(xt[:1000]).mean())
    print(f"sec_per_epoch={secs / a.epochs:.3f} recon_error={err:.4f} pseudo_likelihood={pl:.3f} "
          f"hidden={a.hidden} lr={a.lr} batch={a.batch} epochs={a.epochs} threads={a.threads}")


if __name__ == "__main__":
    sys.exit(main())
