# Workload of tests/integration/python.sh (call tracing): f() is called
# exactly argv[1] times, g() exactly 7 times, and h() raises and catches.
# It first sleeps 0.5 s: calls made before the probe attached (it attaches
# as the process execs) cannot be counted.
import sys, time

def f(x):
    return x + 1

def g():
    return 0

def h():
    try:
        raise ValueError("x")
    except ValueError:
        return 1

def main(n):
    s = 0
    for i in range(n):
        s = f(s)
    for i in range(7):
        g()
    for i in range(3):
        h()
    return s

time.sleep(0.5)
main(int(sys.argv[1]))
