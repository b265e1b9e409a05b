#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Check krdmactl's JSON against the schema of Documentation/cli.rst.

    check_json.py CLI_RST OBJECT [FILE]

reads the object tables of the section "JSON output" of cli.rst (each
after a comment ".. json-object: NAME") and checks that FILE (default
stdin) is one JSON document of type OBJECT: every key of the table and no
other (but a key marked "(on failure)", which may be absent), each of its
type. Exit status 0 when it is, 1 (and what is wrong on stderr) when not,
2 when the schema itself is wrong. With $CHECK_JSON_SEEN, the names of
the objects it checked are added to that file. For test_krdmactl.sh and
the guest tests; never installed.

Types: integer, number (integer or fraction), string, boolean, null, NAME
(another object of the schema), [T] (an array of T), {NAME: T} (an object
whose keys are names, each value a T), A|B (either).
"""
import json
import os
import re
import sys


def die(msg):
    """the schema is wrong: exit status 2"""
    print(msg, file=sys.stderr)
    sys.exit(2)


def parse_schema(path):
    """{NAME: {key: (type, optional)}} from the tables of @path"""
    lines = open(path, encoding="utf-8").read().split("\n")
    schema = {}
    i = 0
    while i < len(lines):
        m = re.match(r"^\.\. json-object: (\w+)$", lines[i])
        i += 1
        if not m:
            continue
        name = m.group(1)
        # the table: a border, the header, a border, rows, a border
        while i < len(lines) and not lines[i].startswith("="):
            i += 1
        border = lines[i]
        cols = [mm.start() for mm in re.finditer(r"=+", border)]
        if len(cols) != 3:
            die("%s: %s: a table of 3 columns, not %r" %
                     (path, name, border))
        i += 3
        keys = {}
        while i < len(lines) and not lines[i].startswith("="):
            line = lines[i]
            i += 1
            key = line[:cols[1]].strip()
            if not key:
                continue        # a continuation of the meaning
            km = re.match(r"^``(\w+)``$", key)
            if not km:
                die("%s: %s: bad key %r" % (path, name, key))
            typ = line[cols[1]:cols[2]].strip()
            opt = typ.endswith(" (on failure)")
            if opt:
                typ = typ[:-len(" (on failure)")]
            keys[km.group(1)] = (typ, opt)
        if name in schema or not keys:
            die("%s: object %s defined twice, or empty" % (path, name))
        schema[name] = keys
    if not schema:
        die("%s: no '.. json-object:' tables" % path)
    # every type it names is defined
    for name, keys in schema.items():
        for key, (typ, _) in keys.items():
            for word in re.findall(r"[A-Z][A-Z_0-9]*", typ):
                if word not in schema and word != "NAME":
                    die("%s: %s.%s: unknown type %s" %
                             (path, name, key, word))
    return schema


def split_alts(typ):
    """A|B|[C|D] -> A, B, [C|D]: "|" outside brackets"""
    alts, depth, cur = [], 0, ""
    for c in typ:
        if c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        if c == "|" and not depth:
            alts.append(cur)
            cur = ""
        else:
            cur += c
    return alts + [cur]


def check(schema, val, typ, where, errs):
    """Does @val have type @typ? Appends what is wrong to @errs."""
    alts = split_alts(typ)
    if len(alts) > 1:
        for alt in alts:
            e = []
            check(schema, val, alt, where, e)
            if not e:
                return
        errs.append("%s: %s is not %s" % (where, json.dumps(val)[:60], typ))
        return
    simple = {
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, (int, float)) and
        not isinstance(v, bool),
        "string": lambda v: isinstance(v, str),
        "boolean": lambda v: isinstance(v, bool),
        "null": lambda v: v is None,
    }
    if typ in simple:
        if not simple[typ](val):
            errs.append("%s: %s is not %s" %
                        (where, json.dumps(val)[:60], typ))
    elif typ.startswith("[") and typ.endswith("]"):
        if not isinstance(val, list):
            errs.append("%s: not an array" % where)
            return
        for n, v in enumerate(val):
            check(schema, v, typ[1:-1], "%s[%d]" % (where, n), errs)
    elif typ.startswith("{NAME: ") and typ.endswith("}"):
        if not isinstance(val, dict):
            errs.append("%s: not an object" % where)
            return
        for k, v in val.items():
            check(schema, v, typ[7:-1], "%s.%s" % (where, k), errs)
    elif typ in schema:
        if SEEN is not None:
            SEEN.add(typ)
        if not isinstance(val, dict):
            errs.append("%s: not an object (%s)" % (where, typ))
            return
        keys = schema[typ]
        for k in val:
            if k not in keys:
                errs.append("%s: key %r is not in %s" % (where, k, typ))
        for k, (t, opt) in keys.items():
            if k in val:
                check(schema, val[k], t, "%s.%s" % (where, k), errs)
            elif not opt:
                errs.append("%s: no key %r (%s)" % (where, k, typ))
    else:
        errs.append("%s: the schema has no type %r" % (where, typ))


# $CHECK_JSON_SEEN: a file to which the objects checked are added, one a
# line (for a test that every object of the schema was seen)
SEEN = set() if os.environ.get("CHECK_JSON_SEEN") else None


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__.split("\n\n")[1])
    schema = parse_schema(sys.argv[1])
    name = sys.argv[2]
    if name not in schema:
        die("no object %s in %s" % (name, sys.argv[1]))
    f = open(sys.argv[3], encoding="utf-8") if len(sys.argv) == 4 \
        else sys.stdin
    try:
        doc = json.load(f)
    except ValueError as e:
        print("not JSON: %s" % e, file=sys.stderr)
        return 1
    errs = []
    check(schema, doc, name, name, errs)
    if SEEN is not None and not errs:
        with open(os.environ["CHECK_JSON_SEEN"], "a") as f:
            f.write("".join(o + "\n" for o in sorted(SEEN)))
    for e in errs[:20]:
        print(e, file=sys.stderr)
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
