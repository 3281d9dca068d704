#!/usr/bin/env python3
"""Runs the examples of README.md and docs/*.md against the binary, so the docs cannot drift from
what it does.

Usage: readme_examples.py GAPLESS_EXTENDER REPOSITORY_ROOT [--at-least N]

The pages run in one demo session, in SESSION_ORDER and then the other docs/*.md by name: the
demo examples of a page continue the session of the pages before it (docs/explain.md explains a
pod beside the one the README's tour bound). A page of SESSION_ORDER that is missing fails, a
`<!-- tested: ... -->` marker that is not right above a fenced block fails, and fewer than N
examples in all (`--at-least`, from CMakeLists.txt) fail: an example moved to a page this script
does not read must not silently stop being run.

A fenced block is an example when the line before it is an HTML comment `<!-- tested: KIND -->`:

  demo              A shell session against the built-in demo cluster. Each command (a run of
                    lines that are not comments) is run with bash; the comment lines right after
                    it, up to a blank line, are its expected output (JSON is compared as JSON,
                    other output line by line). `localhost:8888` is the
                    demo extender this script starts; `build/gapless-extender` is the binary given,
                    `build/kubectl-gapless` the one beside it.
  policy            A policy file: `gapless-extender --check-policy` must accept it.
  pods              Pod YAML documents: the demo's filter must accept each (no Error).
  subset-of PATH    YAML whose every key and value must be found in the repository file PATH
                    (the README may leave keys out, never change them).

Exits 0 when every example passes; prints what failed otherwise.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MARKER = re.compile(r"^<!-- tested: (\S+)(?: (\S+))? -->$")
SESSION_ORDER = ["README.md", "docs/requesting-gpus.md", "docs/node-side.md", "docs/policies.md",
                 "docs/quotas.md", "docs/explain.md", "docs/extender-flags-and-routes.md",
                 "docs/metrics.md", "docs/preemption.md"]
failures = []


def pages(root):
    """The pages to run, in session order; a missing page of SESSION_ORDER is a failure."""
    out = []
    for page in SESSION_ORDER:
        if os.path.exists(os.path.join(root, page)):
            out.append(page)
        else:
            failures.append(f"{page}: missing (tests/readme/readme_examples.py SESSION_ORDER)")
    docs = sorted(f"docs/{f}" for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
    return out + [page for page in docs if page not in out]


def examples(readme):
    """(kind, argument, line number, block text) for every marked fenced block."""
    lines = open(readme, encoding="utf-8").read().split("\n")
    out = []
    for i, line in enumerate(lines):
        m = MARKER.match(line.strip())
        if not m:
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
            failures.append(f"{os.path.basename(readme)}:{i + 1}: marker not above a fenced block")
            continue
        end = next(j for j in range(i + 2, len(lines)) if lines[j].startswith("```"))
        out.append((m.group(1), m.group(2), i + 2, "\n".join(lines[i + 2:end])))
    return out


class Demo:
    """gapless-extender on the built-in demo cluster, on a free loopback port."""

    def __init__(self, binary):
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([binary, "--listen", "127.0.0.1:0"], stdout=self.log,
                                     stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        self.port = None
        while self.port is None and time.time() < deadline:
            self.log.seek(0)
            m = re.search(rb"http://127\.0\.0\.1:(\d+)", self.log.read())
            if m:
                self.port = int(m.group(1))
            else:
                time.sleep(0.05)
        if self.port is None:
            raise SystemExit("the demo extender did not start")

    def post(self, path, body):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=body.encode())
        with urllib.request.urlopen(req, timeout=10) as res:
            return json.loads(res.read())

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


def same_output(expected_lines, actual):
    """JSON is compared as JSON (its lines joined); other output line by line, as text."""
    try:
        return json.loads("".join(expected_lines)) == json.loads(actual)
    except ValueError:
        return [e.strip() for e in expected_lines] == [a.strip() for a in
                                                       actual.strip().split("\n")]


def run_demo_block(where, text, binary, demo):
    steps, command, expected = [], [], []
    for line in text.split("\n"):
        if line.startswith("#"):
            if command:  # output of the command before
                expected.append(line[1:].strip())
            continue
        if expected or not line.strip():
            if command:
                steps.append((command, expected))
            command, expected = [], []
        if line.strip():
            command.append(line)
    if command:
        steps.append((command, expected))
    for command, expected in steps:
        script = "\n".join(command).replace("localhost:8888", f"127.0.0.1:{demo.port}")
        script = script.replace("build/gapless-extender", binary)
        script = script.replace("build/kubectl-gapless",
                                os.path.join(os.path.dirname(binary), "kubectl-gapless"))
        res = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
        if res.returncode != 0:
            failures.append(f"{where}: `{command[-1]}` failed: {res.stderr.strip()}")
        elif expected and not same_output(expected, res.stdout):
            failures.append(f"{where}: `{command[-1]}`\n  page:   {''.join(expected)}\n"
                            f"  binary: {res.stdout.strip()}")


def run_policy_block(where, text, binary):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write(text + "\n")
        f.flush()
        res = subprocess.run([binary, "--check-policy", f.name], capture_output=True, text=True)
        if res.returncode != 0:
            failures.append(f"{where}: --check-policy refuses it: {res.stderr.strip()}")


def yaml_or_none():
    try:
        import yaml  # noqa: PLC0415 (optional: Debian's python3-yaml)
        return yaml
    except ImportError:
        return None


def run_pods_block(where, text, demo):
    yaml = yaml_or_none()
    if yaml is None:
        print(f"{where}: skipped (no PyYAML)")
        return
    for n, pod in enumerate(yaml.safe_load_all(text)):
        pod.setdefault("metadata", {}).update({"name": f"readme-{n}", "uid": f"readme-{n}"})
        args = {"Pod": pod, "Nodes": None, "NodeNames": ["h100-nvs-01"]}
        answer = demo.post("/filter", json.dumps(args))
        if answer.get("Error"):
            failures.append(f"{where}: pod {n + 1}: {answer['Error']}")


def contained(part, whole, path="") -> list:
    if isinstance(part, dict) and isinstance(whole, dict):
        out = []
        for k, v in part.items():
            out += contained(v, whole[k], f"{path}.{k}") if k in whole else [f"{path}.{k} missing"]
        return out
    if isinstance(part, list) and isinstance(whole, list) and len(part) <= len(whole):
        return sum((contained(p, w, f"{path}[{i}]") for i, (p, w) in
                    enumerate(zip(part, whole))), [])
    return [] if part == whole else [f"{path}: page {part!r}, file {whole!r}"]


def run_subset_block(where, text, path):
    yaml = yaml_or_none()
    if yaml is None:
        print(f"{where}: skipped (no PyYAML)")
        return
    whole = yaml.safe_load(open(os.path.join(ROOT, path), encoding="utf-8"))
    for problem in contained(yaml.safe_load(text), whole):
        failures.append(f"{where}: differs from {path}: {problem}")


def run_example(where, kind, arg, text, binary, demo):
    if kind == "demo":
        run_demo_block(where, text, binary, demo)
    elif kind == "policy":
        run_policy_block(where, text, binary)
    elif kind == "pods":
        run_pods_block(where, text, demo)
    elif kind == "subset-of":
        run_subset_block(where, text, arg)
    else:
        failures.append(f"{where}: unknown example kind {kind}")


def main():
    binary, root = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    at_least = int(sys.argv[sys.argv.index("--at-least") + 1]) if "--at-least" in sys.argv else 1
    if shutil.which("curl") is None:
        raise SystemExit("curl is needed (scripts/deps.sh installs it)")
    found = [(page, example) for page in pages(root)
             for example in examples(os.path.join(root, page))]
    demo = Demo(binary)
    try:
        for page, (kind, arg, line, text) in found:
            run_example(f"{page}:{line}", kind, arg, text, binary, demo)
    finally:
        demo.stop()
    if len(found) < at_least:
        failures.append(f"only {len(found)} tested examples found, at least {at_least} expected")
    for f in failures:
        print("FAILED:", f)
    failed_blocks = len({":".join(f.split(":")[:2]) for f in failures})
    print(f"{len(found) - failed_blocks} passed, {failed_blocks} failed ({len(found)} examples)")
    sys.exit(1 if failures or not found else 0)


if __name__ == "__main__":
    main()
