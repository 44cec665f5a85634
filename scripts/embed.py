#!/usr/bin/env python3
"""Build step: turn a text file (an SQL script) into a C header that defines
it as one NUL-terminated array, so that a program carries the very file
users can run themselves.

    embed.py NAME INPUT OUTPUT   ->   static const char NAME[] = {...};

Bytes, not a string literal: C11 only promises string literals of 4095
bytes, and -Wpedantic holds us to it.
"""
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: embed.py NAME INPUT OUTPUT")
    name, src, dst = sys.argv[1:]
    data = open(src, "rb").read() + b"\0"
    out = [f"/* Generated from {src.rsplit('/', 1)[-1]} by scripts/embed.py: edit that file. */",
           f"static const char {name}[] = {{"]
    for i in range(0, len(data), 16):
        out.append("    " + ", ".join(str(b) for b in data[i:i + 16]) + ",")
    out.append("};")
    with open(dst, "w", encoding="ascii") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
