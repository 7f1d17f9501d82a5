#!/usr/bin/env python3
"""The aggregation of scripts/count-shared.sh: reads `perf script -F comm,tid,event,trace,ip,sym` of the count_shared
probes (each hit with its call stack) on stdin and prints the objects retained or released at least half a time per
notification, with their threads and call sites.

    perf script -i shared.data -F comm,tid,event,trace,ip,sym | scripts/count-shared.py EVENTS
"""

import collections
import re
import subprocess
import sys

# Frames of the runtime and of the compiler's outlined copies and destroys: the call site is the first frame after them.
RUNTIME = re.compile(r"^(swift_|_swift|swift::)|(WOh|WOe|WOy|WOs|Wxx|WOb|WOc|WOr|WOd|WOf|wcp|wca|wxx|wtk|wta|WOi|WOj|Tm)$")
# Only user-space heap addresses below 2^47 are objects whose count the runtime changes.
OBJECT_LIMIT = 1 << 47


def demangle(names):
    if not names:
        return []
    output = subprocess.run(
        ["swift", "demangle", "--simplified", "--compact"], input="\n".join(names), capture_output=True, text=True
    ).stdout
    return output.split("\n")


def main():
    notifications = int(sys.argv[1])
    calls = collections.Counter()
    threads = collections.defaultdict(set)
    sites = collections.defaultdict(collections.Counter)
    # Objects a release never frees but the arrays' growth releases (the empty array's storage) are immortal.
    immortal = set()
    head, frames = None, []

    def flush():
        if head is None:
            return
        match = re.search(r"object=(\d+)", head)
        if not match:
            return
        address = int(match.group(1))
        if address == 0 or address >= OBJECT_LIMIT:
            return
        kind = "retain" if "count_shared:retain" in head else "release"
        thread = head[: head.index("count_shared:")].strip()
        calls[address] += 1
        threads[address].add(thread)
        symbols = [frame.split("+")[0] for frame in frames]
        site = next((symbol for symbol in symbols if not RUNTIME.search(symbol)), "?")
        if kind == "release" and any("_consumeAndCreateNew" in symbol for symbol in symbols[:4]):
            immortal.add(address)
        sites[address][(kind, site)] += 1

    for line in sys.stdin:
        if not line.strip():
            flush()
            head, frames = None, []
        elif head is None:
            head = line
        else:
            parts = line.strip().split(" ", 1)
            frames.append(parts[1] if len(parts) > 1 else "?")
    flush()

    total = 0
    rows = [(address, count) for address, count in calls.most_common() if count / notifications >= 0.5]
    for address, count in rows:
        if address in immortal and count / notifications > 10:
            continue
        total += count
        top = sites[address].most_common(4)
        names = demangle([site for (_, site), _ in top])
        described = "; ".join(
            f"{kind} {n / notifications:.1f} {name[:70]}" for ((kind, _), n), name in zip(top, names)
        )
        print(f"{hex(address)} {count / notifications:5.1f} per notification, {len(threads[address])} threads: {described}")
    print(f"calls per notification on these objects: {total / notifications:.1f} "
          f"(all calls on objects: {sum(calls.values()) / notifications:.1f})")


if __name__ == "__main__":
    main()
