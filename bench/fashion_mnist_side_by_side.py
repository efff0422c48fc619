#!/usr/bin/env python3
"""The main job side by side: tinyrw's examples/fashion_mnist against tinygrad on its CPU device,
the same model (tinygrad's beautiful_mnist CNN), batch size, step count, learning rate and data
(Debian's dataset-fashion-mnist), in one run. Prints images/s of training for both, their ratio
(tinygrad's time over tinyrw's: above 1, tinyrw is faster) and both test accuracies.

  python3 bench/fashion_mnist_side_by_side.py [--steps 320] [--bs 64] [--lr 0.002] [--binary build/bin/fashion_mnist]

tinygrad: its source at --tinygrad-path ($TINYGRAD_PATH, else /tmp/tg), from the mirror:
  mkdir -p /tmp/tg && git -C /work/.mirror/tinygrad+tinygrad/repo archive HEAD tinygrad | tar x -C /tmp/tg
tinygrad reads the same .gz files with Python's gzip module; it trains with TinyJit, as its
beautiful_mnist does, and its first (compiling) steps count, as tinyrw's do.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

TINYGRAD_SCRIPT = r'''
import gzip, os, sys, time
from tinygrad import Tensor, TinyJit, nn, dtypes, Context
data, steps, bs, lr = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
def idx(name):
  b = gzip.open(os.path.join(data, name)).read()
  ndim = b[3]; dims = [int.from_bytes(b[4+4*i:8+4*i], "big") for i in range(ndim)]
  return Tensor(b[4+4*ndim:], dtype=dtypes.uint8).reshape(dims)
X_train = idx("train-images-idx3-ubyte.gz").reshape(-1, 1, 28, 28)
Y_train = idx("train-labels-idx1-ubyte.gz")
X_test = idx("t10k-images-idx3-ubyte.gz").reshape(-1, 1, 28, 28)
Y_test = idx("t10k-labels-idx1-ubyte.gz")
class Model:
  def __init__(self):
    self.layers = [nn.Conv2d(1, 32, 5), Tensor.relu, nn.Conv2d(32, 32, 5), Tensor.relu,
                   nn.BatchNorm(32), Tensor.max_pool2d, nn.Conv2d(32, 64, 3), Tensor.relu,
                   nn.Conv2d(64, 64, 3), Tensor.relu, nn.BatchNorm(64), Tensor.max_pool2d,
                   lambda x: x.flatten(1), nn.Linear(576, 10)]
  def __call__(self, x): return x.sequential(self.layers)
model = Model()
opt = nn.optim.Adam(nn.state.get_parameters(model), lr=lr)
@TinyJit
def train_step():
  with Context(TRAINING=1):
    opt.zero_grad()
    samples = Tensor.randint(bs, high=X_train.shape[0])
    x = X_train[samples].float() / 255
    loss = model(x).sparse_categorical_crossentropy(Y_train[samples].cast(dtypes.int32)).backward()
    return loss.realize(*opt.schedule_step())
start = time.perf_counter()
for i in range(steps):
  # the learning rate falls linearly from lr to a tenth of it, as tinyrw's main job's does
  opt.lr.assign(Tensor([lr * (1 - 0.9 * i / max(1, steps - 1))], device=opt.lr.device, dtype=opt.lr.dtype)).realize()
  loss = train_step().item()
secs = time.perf_counter() - start
right = 0
for at in range(0, 10000, 1000):
  right += (model(X_test[at:at+1000].float() / 255).argmax(axis=1) == Y_test[at:at+1000]).sum().item()
print(f"RESULT {secs:.3f} {right / 10000:.4f} {loss:.4f}")
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=320)
    ap.add_argument("--bs", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--binary", default="build/bin/fashion_mnist")
    ap.add_argument("--tinygrad-path", default=os.environ.get("TINYGRAD_PATH", "/tmp/tg"))
    ap.add_argument("--timeout", type=int, default=3600)
    a = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run([a.binary, "--data", a.data, "--steps", str(a.steps), "--bs", str(a.bs),
                              "--lr", str(a.lr), "--out", os.path.join(tmp, "w.safetensors")],
                             capture_output=True, text=True, timeout=a.timeout)
        if out.returncode != 0:
            sys.exit(f"tinyrw failed: {out.stderr.strip()}")
        m = re.search(r"in ([0-9.]+) s \(([0-9.]+) img/s\); test accuracy ([0-9.]+)", out.stdout)
        if not m:
            sys.exit(f"tinyrw printed no result: {out.stdout[-500:]}")
        rw_secs, rw_acc = float(m.group(1)), float(m.group(3))

        env = dict(os.environ, PYTHONPATH=a.tinygrad_path, DEV="CPU",
                   CACHEDB=os.path.join(tmp, "tinygrad-cache.db"))
        script = os.path.join(tmp, "tg_mnist.py")
        with open(script, "w") as f:
            f.write(TINYGRAD_SCRIPT)
        try:
            tg = subprocess.run([sys.executable, script, a.data, str(a.steps), str(a.bs), str(a.lr)],
                                capture_output=True, text=True, env=env, timeout=a.timeout)
            tm = re.search(r"RESULT ([0-9.]+) ([0-9.]+)", tg.stdout)
            tg_result = (float(tm.group(1)), float(tm.group(2))) if tm else None
            tg_error = None if tm else (tg.stderr.strip().splitlines() or ["no output"])[-1]
        except subprocess.TimeoutExpired:
            tg_result, tg_error = None, f"timed out after {a.timeout} s"

    images = a.steps * a.bs
    print(f"{a.steps} steps of {a.bs} images (lr {a.lr}), Fashion-MNIST, CPU")
    print(f"tinyrw:   {rw_secs:8.1f} s  {images / rw_secs:8.1f} img/s  test accuracy {rw_acc:.4f}")
    if tg_result:
        tg_secs, tg_acc = tg_result
        print(f"tinygrad: {tg_secs:8.1f} s  {images / tg_secs:8.1f} img/s  test accuracy {tg_acc:.4f}")
        print(f"ratio (tinygrad time / tinyrw time): {tg_secs / rw_secs:.2f}x")
    else:
        print(f"tinygrad: not available: {tg_error}")


if __name__ == "__main__":
    main()
