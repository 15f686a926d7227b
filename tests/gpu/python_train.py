# GPU validation workload of the python probe (tests/gpu/python.sh): a small
# PyTorch training loop whose step time is measured per phase. Phases are
# gated by files so the harness can attach and detach ntcore between them:
# for phase k it waits for DIR/go.k, runs STEPS steps, writes DIR/done.k
# with the per-step times (ms, one per line, CUDA-synchronised).
import os, sys, time
import torch
import torch.nn as nn

class Net(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.l1 = nn.Linear(width, width)
        self.l2 = nn.Linear(width, width)
        self.l3 = nn.Linear(width, 10)

    def forward(self, x):
        x = torch.relu(self.l1(x))
        x = torch.relu(self.l2(x))
        return self.l3(x)

def train_step(model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss

def main():
    d, phases, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    width = int(sys.argv[4]) if len(sys.argv) > 4 else 2048
    batch = int(sys.argv[5]) if len(sys.argv) > 5 else 512
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = Net(width).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(batch, width, device=dev)
    y = torch.randint(0, 10, (batch,), device=dev)
    for _ in range(50):  # warm-up
        train_step(model, opt, x, y)
    torch.cuda.synchronize()
    open(os.path.join(d, "ready"), "w").close()
    for k in range(phases):
        go = os.path.join(d, "go.%d" % k)
        while not os.path.exists(go):
            time.sleep(0.01)
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            train_step(model, opt, x, y)
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
        with open(os.path.join(d, "done.%d.tmp" % k), "w") as f:
            f.write("\n".join("%.4f" % t for t in times))
        os.rename(os.path.join(d, "done.%d.tmp" % k), os.path.join(d, "done.%d" % k))

main()
