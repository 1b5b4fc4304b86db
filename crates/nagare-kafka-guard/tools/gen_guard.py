#!/usr/bin/env python3
"""Generates src/generated.rs: a check function for every Kafka request message of the
kafka-protocol crate (and the consumer-protocol subscription inside JoinGroup), and for
every response message nagare decodes (RESPONSES below), each walking the body exactly as
the crate's decoder does, but allocating nothing from wire counts and refusing any array
whose count exceeds the bytes left. The crate's own decoder calls
`Vec::with_capacity(count)` with the count read from the wire, so a 20-byte body claiming
2^31 elements would abort the process; bodies go through these checks first.

The check bodies are mechanical rewrites of the crate's generated `decode` bodies (same
field order and version conditions), so they stay exact. The kafka-protocol version is
the one Cargo.lock names; its sources come from cargo's registry (run `cargo fetch`
first) or from --src. The output is piped through rustfmt, so it is exactly what
`cargo fmt` keeps. Usage (from anywhere):
    python3 crates/nagare-kafka-guard/tools/gen_guard.py [--src DIR] [--check]
--check writes nothing and fails when src/generated.rs is not what this script makes
(tests/generated_is_current.rs runs it under `cargo test`).
"""

import argparse
import difflib
import glob
import os
import re
import subprocess
import sys

CRATE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(os.path.dirname(CRATE))
DEST = os.path.join(CRATE, "src", "generated.rs")

# The responses nagare decodes: the share client's, and those of nagare-kafka's small
# client (`nagare produce`, `consume`, `bench`): module, API key.
RESPONSES = [
    ("api_versions_response", "ApiVersions"),
    ("metadata_response", "Metadata"),
    ("find_coordinator_response", "FindCoordinator"),
    ("sasl_handshake_response", "SaslHandshake"),
    ("sasl_authenticate_response", "SaslAuthenticate"),
    ("share_group_heartbeat_response", "ShareGroupHeartbeat"),
    ("share_fetch_response", "ShareFetch"),
    ("share_acknowledge_response", "ShareAcknowledge"),
    ("incremental_alter_configs_response", "IncrementalAlterConfigs"),
    ("produce_response", "Produce"),
    ("fetch_response", "Fetch"),
    ("list_offsets_response", "ListOffsets"),
]

# The consumer-protocol subscription carried inside JoinGroup (the Kafka front end reads
# the topics it names).
SUBSCRIPTION = ("consumer_protocol_subscription", "ConsumerProtocolSubscription")

KEEP_VARS = {"num_tagged_fields", "tag", "size", "unknown_value", "unknown_tagged_fields"}

DECODE = re.compile(
    r"impl Decodable for (\w+) \{\n    fn decode<B: ByteBuf>\(buf: &mut B, version: i16\) -> Result<Self> \{\n(.*?)\n    \}\n\}",
    re.S,
)


def locked_version():
    """The kafka-protocol version Cargo.lock pins."""
    lock = open(os.path.join(ROOT, "Cargo.lock")).read()
    found = re.findall(r'\[\[package\]\]\nname = "kafka-protocol"\nversion = "([^"]+)"', lock)
    if len(found) != 1:
        sys.exit(f"Cargo.lock names kafka-protocol {len(found)} times; expected once")
    return found[0]


def crate_src(version, given):
    if given:
        return given
    home = os.environ.get("CARGO_HOME") or os.path.expanduser("~/.cargo")
    found = sorted(glob.glob(f"{home}/registry/src/*/kafka-protocol-{version}/src"))
    if not found:
        sys.exit(f"kafka-protocol-{version} sources not found under {home}/registry; run cargo fetch or pass --src")
    return found[0]


def fn_name(module, struct):
    return f"check_{module}_{struct}"


def field_types(text):
    structs = {}
    for m in re.finditer(r"pub struct (\w+) \{\n(.*?)\n\}", text, re.S):
        structs[m.group(1)] = dict(re.findall(r"\n?\s*pub (\w+): ([^\n]+),", m.group(2)))
    return structs


def inner_type(t):
    """The struct named by a field type: Option<Vec<X>>, Vec<X>, Option<X>, X."""
    t = t.strip()
    for wrapper in ("Option<", "Vec<"):
        while t.startswith(wrapper):
            t = t[len(wrapper):-1].strip()
    return t.replace("super::", "")


def rewrite(module, name, body, structs):
    """A decode body with every value it builds replaced by `()`: only the decode calls,
    the version conditions and the tagged-field loop stay."""
    fields = structs[name]
    body = re.sub(r"Ok\(Self \{.*?\n        \}\)", "Ok(())", body, flags=re.S)
    body = re.sub(r"Ok\(Self \{[^\n]*\}\)", "Ok(())", body)
    lines = body.split("\n")
    out = []
    i = 0
    current = None
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^(\s*)let (mut )?(\w+)(: [^=]+)? = (.*)$", line)
        # An assignment, also one whose value rustfmt moved to the next line.
        a = re.match(r"^\s*(\w+) =(\s|$)", line)
        if m:
            current = m.group(3)
        elif a:
            current = a.group(1)
        if m and m.group(3) not in KEEP_VARS:
            indent, mut, var, _, rest = m.groups()
            stmt = [line]
            if not rest.endswith(";"):
                j = i + 1
                while True:
                    stmt.append(lines[j])
                    if lines[j] == indent + "};" or (lines[j].startswith(indent) and lines[j].strip().endswith(";") and len(lines[j]) - len(lines[j].lstrip()) == len(indent)):
                        break
                    j += 1
                i = j
            if len(stmt) == 1:
                if ".decode(" not in rest:
                    stmt = [f"{indent}let {mut or ''}{var} = ();"]
            else:
                new = [stmt[0]]
                for s in stmt[1:]:
                    st = s.strip()
                    if st in ("} else {", "}", "};") or st.startswith("if ") or st.startswith("} else if") or ".decode(" in st:
                        new.append(s)
                    else:
                        new.append(s[: len(s) - len(s.lstrip())] + "()")
                stmt = new
            for s in stmt:
                out.append(replace_structs(module, s, var, fields))
            i += 1
            continue
        out.append(replace_structs(module, line, current, fields))
        i += 1
    return "\n".join(out)


def replace_structs(module, line, var, fields):
    """A nested struct's decode becomes a call of its walker, typed by the field it fills."""
    for pattern, walker in (("types::Struct { version }", "Checked"), ("types::OptionStruct { version }", "OptionChecked")):
        if pattern in line:
            if var not in fields:
                raise SystemExit(f"{module}: cannot type struct decode for {var!r}: {line}")
            target = fn_name(module, inner_type(fields[var]))
            line = line.replace(pattern, f"types::{walker}({target}, version)")
    return line


def walkers(src, module, out):
    """Appends the walkers of every struct `module` decodes; returns their names."""
    text = open(f"{src}/messages/{module}.rs").read()
    structs = field_types(text)
    names = []
    for m in DECODE.finditer(text):
        name, body = m.group(1), m.group(2)
        names.append(name)
        out.append(f"fn {fn_name(module, name)}(buf: &mut Bytes, version: i16) -> Result<()> {{")
        out.append(rewrite(module, name, body, structs))
        out.append("}")
        out.append("")
    if not names:
        sys.exit(f"{module}: no decode body found")
    return names


def generate(src, version):
    out = [
        f"// @generated by tools/gen_guard.py from kafka-protocol {version}; do not edit.",
        "// See src/lib.rs for what these checks are for.",
        "#![allow(unused, non_snake_case, clippy::all)]",
        "",
        "use bytes::Bytes;",
        "use kafka_protocol::messages::ApiKey;",
        "use kafka_protocol::protocol::buf::ByteBuf;",
        "use std::collections::BTreeMap;",
        "",
        "use crate::error::{bail, Result};",
        "use crate::types;",
        "",
    ]

    # Requests: every message the crate has, dispatched as its `request_header_version` is.
    struct_module = {}
    for path in sorted(glob.glob(f"{src}/messages/*_request.rs")):
        module = os.path.basename(path)[:-3]
        for name in walkers(src, module, out):
            struct_module[name] = module
    messages = open(f"{src}/messages.rs").read()
    start = messages.index("pub fn request_header_version")
    header_fn = messages[start:messages.index("pub fn response_header_version")]
    arms = re.findall(r"ApiKey::(\w+) =>\s*\{?\s*(\w+)Request::header_version", header_fn)
    if not arms:
        sys.exit("messages.rs: no request_header_version arms found")
    out.append("/// Walks a request body of `key` at `version` without allocating from wire counts.")
    out.append("pub(crate) fn check_request(key: ApiKey, buf: &mut Bytes, version: i16) -> Result<()> {")
    out.append("    match key {")
    for key, kind in arms:
        struct = f"{kind}Request"
        out.append(f"        ApiKey::{key} => {fn_name(struct_module[struct], struct)}(buf, version),")
    out.append("    }")
    out.append("}")
    out.append("")

    # Responses: only those nagare decodes.
    for module, key in RESPONSES:
        if f"{key}Response" not in walkers(src, module, out):
            sys.exit(f"{module}: no {key}Response")
    out.append("/// Walks a response body of `key` at `version` without allocating from wire counts;")
    out.append("/// `None` for a key with no walker here.")
    out.append("pub(crate) fn check_response(key: ApiKey, buf: &mut Bytes, version: i16) -> Option<Result<()>> {")
    out.append("    Some(match key {")
    for module, key in RESPONSES:
        out.append(f"        ApiKey::{key} => {fn_name(module, key + 'Response')}(buf, version),")
    out.append("        _ => return None,")
    out.append("    })")
    out.append("}")
    out.append("")

    module, struct = SUBSCRIPTION
    walkers(src, module, out)
    out.append("/// Walks a consumer-protocol subscription body at `version` without allocating from")
    out.append("/// wire counts.")
    out.append("pub(crate) fn check_subscription(buf: &mut Bytes, version: i16) -> Result<()> {")
    out.append(f"    {fn_name(module, struct)}(buf, version)")
    out.append("}")

    counts = f"{len(arms)} requests, {len(RESPONSES)} responses, 1 subscription"
    return rustfmt("\n".join(out) + "\n"), counts


def rustfmt(text):
    """The text as `cargo fmt` would leave it (run in the crate, so any rustfmt.toml of
    the workspace applies)."""
    done = subprocess.run(
        ["rustfmt", "--edition", "2021", "--emit", "stdout"],
        input=text,
        capture_output=True,
        text=True,
        cwd=CRATE,
    )
    if done.returncode != 0:
        sys.exit(f"rustfmt failed:\n{done.stderr}")
    return done.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", help="kafka-protocol's src directory (default: cargo's registry)")
    parser.add_argument("--check", action="store_true", help="write nothing; fail when src/generated.rs is stale")
    args = parser.parse_args()
    version = locked_version()
    text, counts = generate(crate_src(version, args.src), version)
    rel = os.path.relpath(DEST, ROOT)
    if args.check:
        current = open(DEST).read() if os.path.exists(DEST) else ""
        if current != text:
            diff = difflib.unified_diff(current.splitlines(), text.splitlines(), rel, "generated", lineterm="", n=1)
            shown = list(diff)[:40]
            sys.exit(f"{rel} is not what tools/gen_guard.py makes; run it.\n" + "\n".join(shown))
        print(f"{rel} is current: {counts}")
        return
    with open(DEST, "w") as f:
        f.write(text)
    print(f"wrote {rel}: {counts}")


if __name__ == "__main__":
    main()
