#!/usr/bin/env python3
"""Compose fencelock's Redis scripts at build time.

Each script is a .lua file. A line

    --- @include "name"

pulls in the block name.lua, found in the first --include-dir that has it
(blocks may include blocks; each is pulled in once per script, before the
first block or script that needs it). A line

    --- @include-local "name"

inside a function pulls the block in there, where its functions are made
only when a call gets that far (Redis runs a script's whole body, and so
makes every function it defines, on every call): for what only a rare
path needs. A block the script already has is not pulled in again; one
pulled in locally stays local, and is pulled in again where the script
includes it outside. Full-line comments and blank lines
are left out of what is sent to Redis, and so are the functions the
script never calls (prune, below); a script that ends by returning one
function's result runs that function's body in place (in_place, below);
everything else goes unchanged.

For every script NAME:SYMBOL given, this writes the composed script to
OUTDIR/NAME.lua (runnable as is: redis-cli --eval OUTDIR/NAME.lua k , a)
and a C string `const char SYMBOL[]` to the --c file, declared in the --h
file (with --api, the given export macro goes in front of each).

With --library NAME:CPREFIX, the scripts (and those given with --extern,
whose C strings another file defines) are also composed into one Redis
function library (Redis 7: FUNCTION LOAD), written to OUTDIR/NAME.lua and
as the C string CPREFIX_library, with CPREFIX_fn(body) giving the
function that runs a script. There the blocks are made once, when the library loads,
not on every call: each goes to the library's top level, unless it (or a
block it needs) reads KEYS or ARGV, which a function gets as arguments;
such a block stays inside each function that needs it, as in the script.
The library's name and its functions' names carry a hash of its text, so
that clients of different builds each find their own.
"""
import argparse
import hashlib
import os
import re
import sys

INCLUDE = re.compile(r'^\s*---\s*@include(-local)?\s+"([A-Za-z0-9_./-]+)"\s*$')


def find(name, dirs):
    for d in dirs:
        p = os.path.join(d, name + '.lua')
        if os.path.isfile(p):
            return os.path.realpath(p)
    sys.exit(f'lua-compose: block "{name}" not found in {dirs}')


def only_functions(path, lines):
    """A block pulled in inside a function defines functions and nothing
    else: a local of its own there could shadow one of the function's."""
    for line in lines:
        if line[:1] not in (' ', '\t') and not line.startswith(('local function ', 'end')):
            sys.exit(f'lua-compose: {path} is included locally but has a top-level line that is not a '
                     f'function: {line!r}')


def compose(path, dirs, seen, stack):
    """The lines of path, its includes first; each file once (seen)."""
    if path in stack:
        sys.exit(f'lua-compose: {path} includes itself (through {stack})')
    out = []
    with open(path, encoding='utf-8') as f:
        for line in f.read().splitlines():
            m = INCLUDE.match(line)
            if m:
                dep = find(m.group(2), dirs)
                if dep not in seen:
                    inner = set(seen) if m.group(1) else seen
                    inner.add(dep)
                    lines = compose(dep, dirs, inner, stack + [path])
                    if m.group(1):
                        only_functions(dep, lines)
                    out += lines
                continue
            s = line.strip()
            if s == '' or (s.startswith('--') and not s.startswith('--[')):
                continue
            out.append(line.rstrip())
    return out


def spans(lines):
    """The functions of lines: (NAME, first, last) of each line `local
    function NAME(...)` at the first column through the line `end` there
    that closes it (blocks write them so; one pulled in with @include-local
    inside another is nested the same way, and listed too). Any other shape
    (a function on one line, a body line at the first column, a long
    string) is a build error: what this cannot read for sure, it refuses."""
    def refuse(line, why):
        sys.exit(f'lua-compose: {why}: {line!r} (blocks write a function as a line "local function '
                 f'NAME(...)", its body indented, and a line "end")')

    for line in lines:
        if FUNC.match(line) and not re.search(r'\)\s*$', line):
            refuse(line, 'a function line with more than its name and parameters')
        elif re.match(r'end\b', line) and line != 'end':
            refuse(line, 'a line at the first column starts with "end" but is not "end" alone')
        elif re.search(r'\[=*\[', line):
            refuse(line, 'a long string or comment, whose lines this cannot tell from code')
    out = []
    for i in range(len(lines)):
        m = FUNC.match(lines[i])
        if not m:
            continue
        j, depth = i, 0
        while True:
            if FUNC.match(lines[j]):
                depth += 1
            elif lines[j] == 'end':
                depth -= 1
            elif j > i and depth > 0 and lines[j][:1] not in ('', ' ', '\t') and not FUNC.match(lines[j]):
                # an unindented body: its own "end"s would close the function
                refuse(lines[j], 'a line of a function\'s body at the first column')
            if depth <= 0 or j == len(lines) - 1:
                break
            j += 1
        out.append((m.group(1), i, j))
    return out


def uses(name):
    """A word name anywhere, also after a dot (t.name, a .. name): counting
    a field of the same name as a use keeps a function, which is harmless;
    missing a use would lose one."""
    return re.compile(r'(?<!\w)' + re.escape(name) + r'\b')


def prune(lines):
    """lines without the functions nothing calls: Redis runs a script's
    whole body on every call, so a function its blocks define and it never
    calls would be made for nothing each time. A top-level function (spans)
    goes if its name is not a word of any other line that stays. Repeated
    until nothing more goes (a function only a removed one called goes
    too)."""
    while True:
        drop = set()
        for name, i, j in spans(lines):
            if not drop.intersection(range(i, j + 1)) and \
                    not any(uses(name).search(l) for k, l in enumerate(lines) if not i <= k <= j):
                drop.update(range(i, j + 1))
        if not drop:
            return lines
        lines = [l for k, l in enumerate(lines) if k not in drop]


TAIL = re.compile(r'^return ([A-Za-z_][A-Za-z0-9_]*)\((.*)\)$')
ARG = re.compile(r'^(KEYS\[\d+\]|ARGV\[\d+\]|[A-Za-z_][A-Za-z0-9_]*|\d+|\'[^\',]*\')$')
LOCALS = re.compile(r'\blocal\s+(?:function\s+)?([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*)')


def in_place(lines):
    """A script that ends by returning what one of its functions returns,
    called only there (`return f(KEYS[1], ARGV[2])`), runs that function's
    body in place instead: its parameters become locals set to the call's
    arguments, and each `return` in the body returns from the script, as
    the call's result did. The same answers, without making the function
    and calling it on every call (the release of a lock, whose block every
    kind's release shares, is such a call). Left as it is unless the
    arguments are keys, arguments, names or constants, no more than the
    parameters (a missing one is nil, as in a call), and no top-level local
    made after the function hides a name its body uses."""
    if not lines:
        return lines
    m = TAIL.match(lines[-1])
    if not m:
        return lines
    name = m.group(1)
    args = [a.strip() for a in m.group(2).split(',')] if m.group(2).strip() else []
    for fname, i, j in spans(lines):
        if fname != name:
            continue
        head = re.match(r'^local function [A-Za-z_][A-Za-z0-9_]*\s*\(([^)]*)\)\s*$', lines[i])
        if not head or lines[j] != 'end':
            return lines
        params = [p.strip() for p in head.group(1).split(',')] if head.group(1).strip() else []
        if '...' in params or len(args) > len(params) or not all(ARG.match(a) for a in args):
            return lines
        body = lines[i + 1:j]
        if any(uses(name).search(l) for k, l in enumerate(lines[:-1]) if not i <= k <= j) or \
                any(uses(name).search(l) for l in body) or uses(name).search(m.group(2)):
            return lines
        later = set()  # every local made after f, wherever on its line
        for l in lines[j + 1:-1]:
            for lm in LOCALS.finditer(l):
                later |= {n.strip() for n in lm.group(1).split(',')}
        if any(uses(n).search(l) for n in later for l in body):
            return lines
        bind = [f"local {', '.join(params)} = {', '.join(args)}"] if params and args else \
            ([f"local {', '.join(params)}"] if params else [])
        return lines[:i] + lines[j + 1:-1] + bind + body
    return lines


WORDS_KA = re.compile(r'\b(KEYS|ARGV)\b')


def includes(path, dirs):
    """The blocks path includes directly, in order."""
    with open(path, encoding='utf-8') as f:
        return [find(m.group(2), dirs) for m in map(INCLUDE.match, f.read().splitlines()) if m]


FUNC = re.compile(r'^local function ([A-Za-z_][A-Za-z0-9_]*)\s*\(')


def only_function_lines(code):
    """Every line of code is inside a top-level `local function NAME(...)`
    that opens at the first column and closes with a line `end` there, an
    include, or blank: a table or a value made at a library's top level
    would be shared by every call, where a script makes its own on each.
    A function on one line is refused too (what follows its `end` on the
    line would be at the top level)."""
    inside = False
    for l in code:
        if not l.strip() or INCLUDE.match(l):
            continue
        if not inside and FUNC.match(l) and not re.search(r'\bend\b', l):
            inside = True
        elif inside and l.rstrip() == 'end':
            inside = False
        elif not inside:
            return False
    return not inside


def block_code(path):
    with open(path, encoding='utf-8') as f:
        return [l for l in f.read().splitlines() if not l.strip().startswith('--')]


def defined(path, dirs, seen=None):
    """The functions path and the blocks it needs (transitively) define."""
    seen = set() if seen is None else seen
    if path in seen:
        return set()
    seen.add(path)
    names = {m.group(1) for m in map(FUNC.match, block_code(path)) if m}
    for d in includes(path, dirs):
        names |= defined(d, dirs, seen)
    return names


def all_block_functions(dirs):
    """Every function any block of the include dirs defines."""
    names = set()
    for d in dirs:
        for f in sorted(os.listdir(d)):
            if f.endswith('.lua'):
                names |= {m.group(1) for m in map(FUNC.match, block_code(os.path.join(d, f))) if m}
    return names


def hoistable(path, dirs, known, memo):
    """A block can be made at the library's top level, where its functions
    live from one call to the next: it defines functions only (above), it
    never assigns to a function's name (a new binding would outlive the
    call), every block function it calls is its own or one of a block it
    includes (not one the script happened to include first, which may stay
    inside the function), and neither it nor any block it needs reads KEYS
    or ARGV."""
    if path not in memo:
        memo[path] = False  # a cycle is refused by compose()
        code = block_code(path)
        own = defined(path, dirs)
        others = known - own
        assigns = re.compile(r'(?<![\w.])(' + '|'.join(map(re.escape, sorted(own | others))) + r')\s*=(?!=)')
        calls_other = re.compile(r'(?<![\w.])(' + '|'.join(map(re.escape, sorted(others))) + r')\b') \
            if others else None
        memo[path] = (only_function_lines(code) and not any(WORDS_KA.search(l) for l in code) and
                      not any(assigns.search(l) for l in code) and
                      not (calls_other and any(calls_other.search(l) for l in code)) and
                      all(hoistable(d, dirs, known, memo) for d in includes(path, dirs)))
    return memo[path]


def library(prefix, scripts, dirs):
    """The function library of scripts [(path, symbol)]: its text, the
    function name of each symbol, and the name of its ping."""
    memo, top, top_lines, walked = {}, set(), [], set()
    known = all_block_functions(dirs)

    def hoist(path):
        for d in includes(path, dirs):
            if d in walked:
                continue
            walked.add(d)
            hoist(d)  # what it needs first
            if hoistable(d, dirs, known, memo):
                top_lines.extend(compose(d, dirs, set(top), []))
                top.add(d)

    for path, _ in scripts:
        hoist(path)
    bodies = [(sym, in_place(prune(compose(path, dirs, set(top), [])))) for path, sym in scripts]
    code = list(top_lines)
    for sym, lines in bodies:
        code.append(f"redis.register_function('@@_{sym}', function(KEYS, ARGV)")
        code += lines
        code.append('end)')
    # A client calls it once after the load: FCALL runs here, as the user
    # and with the node's memory as they are (no flags, as the others).
    code.append("redis.register_function('@@_ping', function() return 1 end)")
    text = '\n'.join(code) + '\n'
    tag = prefix + '_' + hashlib.sha1(text.encode('utf-8')).hexdigest()[:12]
    text = f'#!lua name={tag}\n' + text.replace("'@@_", f"'{tag}_")
    return text, {sym: f'{tag}_{sym}' for _, sym in scripts}, f'{tag}_ping'


def c_string(lines):
    def esc(s):
        return s.replace('\\', '\\\\').replace('"', '\\"')
    return '\n'.join(f'    "{esc(l)}\\n"' for l in lines) or '    ""'


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--include-dir', action='append', default=[])
    ap.add_argument('--c', required=True)
    ap.add_argument('--h', required=True)
    ap.add_argument('--outdir', required=True)
    ap.add_argument('--api', default='')
    ap.add_argument('--header-include', action='append', default=[])
    ap.add_argument('--sha-of', default='',
                    help='also emit const char *NAME(const char *body): the sha1 Redis names a script by')
    ap.add_argument('--library', default='', help='NAME:CPREFIX: also a Redis function library CPREFIX_library')
    ap.add_argument('--extern', action='append', default=[],
                    help='path/to/name.lua:symbol of a script another file defines, for --library')
    ap.add_argument('scripts', nargs='+', help='path/to/name.lua:symbol')
    a = ap.parse_args()

    guard = re.sub(r'[^A-Za-z0-9]', '_', os.path.basename(a.h)).upper()
    h = [f'/* Generated by scripts/lua-compose.py from the .lua sources: do not edit. */',
         f'#ifndef {guard}', f'#define {guard}', '']
    h += [f'#include {inc}' for inc in a.header_include]
    c = [f'/* Generated by scripts/lua-compose.py from the .lua sources: do not edit. */',
         '/* A script may be longer than the 4095 bytes C99 promises for a literal. */',
         '#pragma GCC diagnostic ignored "-Woverlength-strings"',
         f'#include "{os.path.basename(a.h)}"', '']
    api = a.api + ' ' if a.api else ''
    shas = []
    for spec in a.scripts:
        src, _, sym = spec.rpartition(':')
        name = os.path.splitext(os.path.basename(src))[0]
        lines = in_place(prune(compose(os.path.realpath(src), a.include_dir, set(), [])))
        with open(os.path.join(a.outdir, name + '.lua'), 'w', encoding='utf-8') as f:
            f.write('\n'.join(lines) + '\n')
        h.append(f'{api}extern const char {sym}[]; /* {os.path.basename(src)} */')
        c.append(f'{api}const char {sym}[] =\n{c_string(lines)};\n')
        body = ''.join(line + '\n' for line in lines)
        shas.append((sym, hashlib.sha1(body.encode('utf-8')).hexdigest()))
    if a.library:
        dirs = a.include_dir
        specs = [spec.rpartition(':') for spec in a.scripts + a.extern]
        lib, _, cp = a.library.partition(':')
        text, names, ping = library(lib, [(os.path.realpath(src), sym) for src, _, sym in specs], dirs)
        lines = text.rstrip('\n').split('\n')
        with open(os.path.join(a.outdir, lib + '.lua'), 'w', encoding='utf-8') as f:
            f.write(text)
        h.append(f'/* The scripts above as one Redis function library ({lib}.lua), and the function')
        h.append(f' * that runs one of them (the same pointer); NULL for any other string. */')
        h.append(f'extern const char {cp}_library[];')
        h.append(f'extern const char {cp}_fn_ping[]; /* a function that returns 1 */')
        h.append(f'const char *{cp}_fn(const char *body);')
        c.append(f'const char {cp}_library[] =\n{c_string(lines)};\n')
        c.append(f'const char {cp}_fn_ping[] = "{ping}";\n')
        c.append(f'const char *{cp}_fn(const char *body)\n{{')
        for _, _, sym in specs:
            c.append(f'    if (body == {sym})\n        return "{names[sym]}";')
        c.append('    return 0;\n}\n')
    if a.sha_of:
        # Computed here, not at run time: a client's first EVALSHA of a
        # script costs no hashing (nor the crypto library's first-use setup).
        h.append(f'/* The sha1 of one of the scripts above (the same pointer), as EVALSHA names it; NULL for any other string. */')
        h.append(f'const char *{a.sha_of}(const char *body);')
        c.append(f'const char *{a.sha_of}(const char *body)\n{{')
        for sym, sha in shas:
            c.append(f'    if (body == {sym})\n        return "{sha}";')
        c.append('    return 0;\n}\n')
    h += ['', '#endif', '']
    with open(a.h, 'w', encoding='utf-8') as f:
        f.write('\n'.join(h))
    with open(a.c, 'w', encoding='utf-8') as f:
        f.write('\n'.join(c))


if __name__ == '__main__':
    main()
