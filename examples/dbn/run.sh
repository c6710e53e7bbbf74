#!/usr/bin/env bash
# SINGA's DBN on Fashion-MNIST, all five stages (README.md): four RBMs
# pre-trained one after the other by CD-1, then the autoencoder unrolled
# from them and fine-tuned by back-propagation; with --compare the same
# autoencoder from random init as well.  Run from the repository root
# after `make` and `make data`.  Extra arguments go to every `shoal run`
# (e.g. -o job.epochs=1 for a shorter run).
set -euo pipefail
build=${BUILD:-build}
compare=0
if [ "${1:-}" = --compare ]; then
  compare=1
  shift
fi
for i in 1 2 3 4; do
  "$build/shoal" run "examples/dbn/rbm$i.conf" "$@"
done
"$build/shoal" run examples/dbn/autoencoder.conf "$@"
if [ "$compare" -eq 1 ]; then
  "$build/shoal" run examples/dbn/autoencoder.conf -o job.init_from= --workspace workspace/dbn-autoencoder-random "$@"
fi
