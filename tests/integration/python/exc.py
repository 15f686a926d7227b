# Workload of tests/integration/python.sh (exceptions): boom() raises
# ValueError 5 times (a raise statement), lookup() gets KeyError 3 times
# (raised inside C by dict), both caught by their callers. It sleeps before
# and after: calls before the probe attached are not seen, and names are
# read from the live process (a process that is gone cannot be read).
def boom(i):
    raise ValueError(i)

def lookup(d, k):
    return d[k]

def main():
    n = 0
    for i in range(5):
        try:
            boom(i)
        except ValueError:
            n += 1
    for i in range(3):
        try:
            lookup({}, i)
        except KeyError:
            n += 1
    return n

import time
time.sleep(0.5)
main()
time.sleep(0.3)
