# SPDX-License-Identifier: MIT
"""The workloads of tests/gpu/overhead.sh, one per process, driven in
windows by overhead_drive.py (files in a control folder):

  overhead_work.py MODE CTL [DATA]
    MODE  mlp | cnn | gpt | loader | launch | oom | fake
    CTL   control folder: writes ready (its pid) after warm-up; then for
          k = 0, 1, ... waits for go.k, runs steps for `window_s` (from
          go.k's text) and writes done.k (per step, one line: its wall
          time and the main thread's CPU time before the closing sync, ms);
          quit ends it.
    DATA  loader: a folder of sample files (made here when missing)

mlp     3 x Linear(4096) + AdamW, batch 2048 (a few ms per step)
cnn     5 conv layers + BatchNorm + AdamW on 64x64 images, bf16 autocast
gpt     GPT-style decoder (8 layers, d 768, 12 heads, seq 512, batch 16,
        vocab 32768, bf16 autocast, AdamW foreach): >= 20 ms per step on an
        H100, several hundred launches per step
loader  a CNN fed by a DataLoader with 4 worker processes, each sample read
        from its own file with open/read (real file reads) per step
launch  launch-bound: a step is 2000 tiny in-place adds on a 1-element
        tensor, then a synchronize (the cost per launch dominates)
oom     a thread launching tiny kernels nonstop while the main thread makes
        8 requests of 2x the card's memory, each 0.2 s apart; prints
        OOM_BEFORE_i / OOM_AFTER_i (CLOCK_REALTIME ns around the failing
        call: the file sink's event times are wall-clock ns) and LAUNCHES
fake    no torch: sleeps 2 ms per step and reads a file (dry runs of the
        driver on a machine without a GPU)
"""
import os
import sys
import time

MODE, CTL = sys.argv[1], sys.argv[2]
DATA = sys.argv[3] if len(sys.argv) > 3 else None


def mono_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def write_atomic(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)


def wait_for(path, quit_path):
    while not os.path.exists(path):
        if os.path.exists(quit_path):
            return False
        time.sleep(0.002)
    return True


def serve(step, sync, warmup=10):
    """Warm up, say ready, then run windows of steps until told to quit."""
    for _ in range(warmup):
        step()
    sync()
    write_atomic(os.path.join(CTL, "ready"), str(os.getpid()))
    k = 0
    while wait_for(os.path.join(CTL, "go.%d" % k), os.path.join(CTL, "quit")):
        window_s = float(open(os.path.join(CTL, "go.%d" % k)).read() or 1.0)
        times = []
        end = time.perf_counter() + window_s
        while time.perf_counter() < end or len(times) < 5:
            t0, c0 = time.perf_counter(), time.thread_time()
            step()
            c1 = time.thread_time()  # the step's CPU, before the sync's wait
            sync()
            times.append(((time.perf_counter() - t0) * 1e3, (c1 - c0) * 1e3))
        write_atomic(os.path.join(CTL, "done.%d" % k),
                     "\n".join("%.4f %.4f" % t for t in times) + "\n")
        k += 1


def fake():
    path = os.path.join(CTL, "fake.bin")
    with open(path, "wb") as f:
        f.write(os.urandom(1 << 20))

    def step():
        time.sleep(0.002)
        with open(path, "rb") as f:
            f.read()
    serve(step, lambda: None)


def main():
    if MODE == "fake":
        return fake()
    import torch
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = True
    dev = "cuda"
    sync = torch.cuda.synchronize
    if MODE == "launch":
        x = torch.zeros(1, device=dev)

        def step():
            for _ in range(2000):
                x.add_(1.0)
        return serve(step, sync)
    if MODE == "oom":
        return oom(torch)
    if MODE == "loader":
        return loader(torch)
    net, batch = build(torch, MODE)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4, foreach=True)
    amp = MODE in ("gpt", "cnn")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            loss = net.loss(*batch)
        loss.backward()
        opt.step()
    serve(step, sync)


def build(torch, mode):
    nn, F = torch.nn, torch.nn.functional
    dev = "cuda"
    if mode == "mlp":
        class MLP(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(4096, 4096), nn.ReLU(),
                                          nn.Linear(4096, 4096), nn.ReLU(),
                                          nn.Linear(4096, 10))

            def loss(self, x, y):
                return F.cross_entropy(self.body(x), y)
        return MLP().to(dev), (torch.randn(2048, 4096, device=dev),
                               torch.randint(0, 10, (2048,), device=dev))
    if mode == "cnn":
        return CNN(torch).to(dev), (torch.randn(128, 3, 64, 64, device=dev),
                                    torch.randint(0, 100, (128,), device=dev))
    if mode == "gpt":
        return GPT(torch).to(dev), (torch.randint(0, 32768, (16, 512), device=dev),)
    raise SystemExit("unknown mode " + mode)


def CNN(torch):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            layers, c = [], 3
            for out in (64, 128, 256, 256, 512):
                layers += [nn.Conv2d(c, out, 3, padding=1), nn.BatchNorm2d(out),
                           nn.ReLU(), nn.MaxPool2d(2)]
                c = out
            self.body = nn.Sequential(*layers, nn.Flatten(), nn.Linear(512 * 2 * 2, 100))

        def loss(self, x, y):
            return F.cross_entropy(self.body(x), y)
    return Net()


def GPT(torch, n_layer=8, d=768, heads=12, seq=512, vocab=32768):
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, heads, d // heads).transpose(1, 2) for z in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
            self.blocks = nn.ModuleList(Block() for _ in range(n_layer))
            self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

        def loss(self, idx):
            t = idx.shape[1]
            x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
            for b in self.blocks:
                x = b(x)
            logits = self.head(self.ln(x))
            return F.cross_entropy(logits[:, :-1].reshape(-1, vocab).float(),
                                   idx[:, 1:].reshape(-1))
    return Net()


def loader(torch):
    import numpy as np
    nfiles, shape = 4096, (3, 64, 64)
    os.makedirs(DATA, exist_ok=True)
    nbytes = 4 * shape[0] * shape[1] * shape[2]
    for i in range(nfiles):
        p = os.path.join(DATA, "s%05d.bin" % i)
        if not os.path.exists(p):
            with open(p, "wb") as f:
                f.write(np.random.rand(nbytes // 4).astype(np.float32).tobytes())

    class Files(torch.utils.data.Dataset):
        def __len__(self):
            return 1 << 30

        def __getitem__(self, i):
            fd = os.open(os.path.join(DATA, "s%05d.bin" % (i % nfiles)), os.O_RDONLY)
            try:
                buf = os.read(fd, nbytes)
            finally:
                os.close(fd)
            x = torch.frombuffer(bytearray(buf), dtype=torch.float32).view(*shape)
            return x, i % 100

    dl = torch.utils.data.DataLoader(Files(), batch_size=128, num_workers=4,
                                     pin_memory=True, persistent_workers=True,
                                     prefetch_factor=4)
    it = iter(dl)
    net = CNN(torch).cuda()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4, foreach=True)

    def step():
        x, y = next(it)
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = net.loss(x, y)
        loss.backward()
        opt.step()
    serve(step, torch.cuda.synchronize)


def oom(torch):
    import threading
    x = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    card = torch.cuda.get_device_properties(0).total_memory
    stop, launches = threading.Event(), [0]

    def launcher():
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            y = torch.zeros(1, device="cuda")
            while not stop.is_set():
                for _ in range(256):
                    y.add_(1.0)
                launches[0] += 256
                s.synchronize()
    write_atomic(os.path.join(CTL, "ready"), str(os.getpid()))
    if not wait_for(os.path.join(CTL, "go.0"), os.path.join(CTL, "quit")):
        return
    th = threading.Thread(target=launcher)
    th.start()
    time.sleep(0.5)
    out = []
    for i in range(8):
        t0 = time.time_ns()
        try:
            torch.empty(2 * card, dtype=torch.uint8, device="cuda")
            t1 = time.time_ns()
            out.append("OOM_BEFORE_%d=%d\nOOM_AFTER_%d=%d\nOOM_OK_%d=0" % (i, t0, i, t1, i))
        except torch.OutOfMemoryError:
            t1 = time.time_ns()
            out.append("OOM_BEFORE_%d=%d\nOOM_AFTER_%d=%d\nOOM_OK_%d=1" % (i, t0, i, t1, i))
        time.sleep(0.2)
    stop.set()
    th.join()
    out.append("LAUNCHES=%d\nCARD_BYTES=%d" % (launches[0], card))
    write_atomic(os.path.join(CTL, "done.0"), "\n".join(out) + "\n")


if __name__ == "__main__":
    main()
