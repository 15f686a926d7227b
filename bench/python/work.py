# bench/python.sh workload: CPU-bound Python with a realistic stack depth
# (a 24-deep call chain doing integer work at the leaf). Waits until the
# file argv[2] exists (the profiler is attached), runs argv[1] rounds and
# prints the seconds the rounds took (perf_counter), nothing else.
import os, sys, time

def leaf(n):
    s = 0
    for i in range(n):
        s += i * i % 7
    return s

def chain(depth, n):
    if depth == 0:
        return leaf(n)
    return chain(depth - 1, n)

def main():
    rounds, go = int(sys.argv[1]), sys.argv[2]
    while not os.path.exists(go):
        time.sleep(0.005)
    t0 = time.perf_counter()
    for _ in range(rounds):
        chain(24, 2000)
    print("%.6f" % (time.perf_counter() - t0))

main()
