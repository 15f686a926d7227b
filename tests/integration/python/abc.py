# Workload of tests/integration/python*.sh: main() -> a() -> b() -> c()
# burns CPU for argv[1] seconds on one line while a second thread
# sleeps in d(). check.py finds the expected lines by their text.
import sys, threading, time
def d():
    time.sleep(600)

def c(end):
    n = 0
    while time.monotonic() < end: n += 1
    return n

def b(end):
    return c(end)

def a(end):
    return b(end)

def main():
    t = threading.Thread(target=d, name="sleeper", daemon=True)
    t.start()
    a(time.monotonic() + float(sys.argv[1]))

main()
