"""The JSON contract: every command's ``--format json`` output is documented, key by key, in docs/json.md.

docs/json.md has one table per command (``## plan``, ``## export --to jax``, ...) with a row per key
path (``ops[].strategy``, ``tensors.*.shape[]``): its type, unit, when it is present and what it means.
The tests parse those tables and hold each command's output, on several models and flags, to them:
every key documented with its type, every key documented as present ``always`` present. A checked-in
example per table (tests/cli/json_examples/) pins the structure (key paths and types) of one small
command's output, and ``schema-<version>.json`` there pins the tables themselves (every key path with
its type, unit and presence): a change to a documented key must come with a new ``schema_version``.
After such a change (and the version bump), rewrite the examples with
``python tests/cli/test_json_contract.py``; it refuses to while the tables changed under the same version.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from planner.cli.main import build_parser, main
from planner.cli.output import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "json.md"
EXAMPLES = ROOT / "tests" / "cli" / "json_examples"
GPT_BLOCK = "examples/jax_gpt_block.py:gpt_block"

TYPES = {"string", "integer", "number", "boolean", "null", "object", "array", "any"}
UNITS = {"-", "bytes", "seconds", "seconds (wall clock)", "FLOPs", "FLOP/s", "bytes/s", "tokens/s", "count", "elements",
         "ratio"}
WALL_CLOCK = "seconds (wall clock)"


# -- docs/json.md ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    path: str
    types: frozenset[str]
    unit: str
    always: bool
    line: int


def parse_doc(text: str) -> tuple[str, dict[str, dict[str, Row]]]:
    """``(schema version, {section: {key path: Row}})`` of docs/json.md; a malformed row is an error naming its line."""
    version = re.search(r"^Schema version: \*\*([0-9]+\.[0-9]+)\*\*$", text, re.M)
    assert version, "docs/json.md: no line 'Schema version: **MAJOR.MINOR**'"
    sections: dict[str, dict[str, Row]] = {}
    section = None
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("## "):
            section = line[3:].strip()
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("| `") else None
        if cells is None or section is None:
            continue
        assert len(cells) == 5, f"docs/json.md:{n}: a key row has 5 cells (key path, type, unit, present, meaning)"
        path, types, unit, present, meaning = cells
        path = path.strip("`")
        types_set = frozenset(t.strip() for t in types.split(" or "))
        assert types_set <= TYPES, f"docs/json.md:{n}: unknown type in {types!r}; use {sorted(TYPES)}"
        assert unit in UNITS, f"docs/json.md:{n}: unknown unit {unit!r}; use {sorted(UNITS)}"
        assert meaning, f"docs/json.md:{n}: {path} has no meaning"
        assert path not in sections.setdefault(section, {}), f"docs/json.md:{n}: {path} documented twice in {section}"
        sections[section][path] = Row(path, types_set, unit, present == "always", n)
    return version.group(1), sections


VERSION, SECTIONS = parse_doc(DOC.read_text(encoding="utf-8"))


def json_type(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return {float: "number", str: "string", list: "array", dict: "object"}[type(value)]


def walk(value, rows: dict[str, Row], path: str = ""):
    """``(documented path, value)`` of every key below ``value``, or ``(None, actual path)`` for one not documented."""
    if isinstance(value, dict):
        for key, child in value.items():
            here = f"{path}.{key}" if path else key
            doc = next((p for p in (f"{path}.{key}" if path else key, f"{path}.*" if path else "*") if p in rows), None)
            if doc is None:
                yield None, here
                continue
            yield doc, child
            if not rows[doc].types == {"any"} and f"{doc}.**" not in rows:
                yield from walk(child, rows, doc)
    elif isinstance(value, list):
        if value and path + "[]" not in rows:
            yield None, path + "[]"
            return
        for child in value:
            yield path + "[]", child
            yield from walk(child, rows, path + "[]")


def problems(data: dict, section: str) -> list[str]:
    """What in ``data`` (one command's JSON) docs/json.md's ``section`` does not say, or says otherwise."""
    rows = SECTIONS[section]
    out = []
    seen: set[str] = set()
    for doc, value in walk(data, rows):
        if doc is None:
            out.append(f"{value}: not documented in docs/json.md ## {section}")
            continue
        seen.add(doc)
        t = json_type(value)
        allowed = rows[doc].types
        if "any" in allowed or t in allowed or (t == "integer" and "number" in allowed):
            continue
        out.append(f"{doc}: is {t}, docs/json.md:{rows[doc].line} says {' or '.join(sorted(allowed))}")
    out += _missing(data, rows, "")
    return out


def _missing(value, rows: dict[str, Row], path: str) -> list[str]:
    """Keys documented as present ``always`` that an object lacks (below every object present)."""
    out = []
    if isinstance(value, dict):
        prefix = f"{path}." if path else ""
        for p, row in rows.items():
            rest = p[len(prefix):]
            if p.startswith(prefix) and rest and not re.search(r"[.\[*]", rest) and row.always and rest not in value:
                out.append(f"{p}: documented as present always (docs/json.md:{row.line}), missing")
        for key, child in value.items():
            doc = f"{prefix}{key}" if f"{prefix}{key}" in rows else f"{prefix}*"
            if doc in rows and f"{doc}.**" not in rows:
                out += _missing(child, rows, doc)
    elif isinstance(value, list):
        for child in value:
            out += _missing(child, rows, path + "[]")
    return out


def section_of(data: dict) -> str:
    if data.get("command") in ("plan", "simulate", "export") and "pipeline" in data:
        return f"export --to {data['format']} --pipeline" if data["command"] == "export" else \
            f"{data['command']} --pipeline"
    if data.get("command") == "explain" and "choices" in data:
        return "explain --pipeline"
    return f"export --to {data['format']}" if data.get("command") == "export" else data["command"]


def structure(data: dict) -> set[tuple[str, str]]:
    """The (documented key path, JSON type) pairs of ``data``: what its checked-in example pins."""
    rows = SECTIONS[section_of(data)]
    return {(doc, json_type(value)) for doc, value in walk(data, rows) if doc is not None}


# -- running the commands --------------------------------------------------------------------------

def run_json(argv: list[str], capsys) -> dict:
    code = main(argv)
    out = capsys.readouterr().out
    assert code == 0, f"shardplan {' '.join(argv)} exited {code}"
    return json.loads(out)


def run_json_process(argv: list[str]) -> dict:
    """In a process of its own: ``run`` and ``calibrate`` start JAX on host devices of their own."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "planner", *argv], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _check_args(tmp: Path) -> list[str]:
    return ["check", "configs/ffn.yaml", "--baseline", str(tmp / "baseline.json"), "--format", "json"]


# Each case: (id, argv). The models cover forward and --training plans, every search, manual regions
# (ops[].collective), propagation phases, ILP solver reports and pending sums in the exports.
CASES = [
    ("plan-ffn", ["plan", "configs/ffn.yaml", "--format", "json"]),
    ("plan-ffn-training-bfs", ["plan", "configs/ffn.yaml", "--training", "--search", "bfs", "--format", "json"]),
    ("plan-megatron-training-ilp", ["plan", "configs/megatron_mlp.yaml", "--training", "--search", "ilp",
                                    "--format", "json"]),
    ("plan-megatron-propagate-phases", ["plan", "configs/megatron_mlp.yaml", "--search", "propagate", "--phases",
                                        "--format", "json"]),
    ("plan-constraints-explicit", ["plan", "configs/constraints.yaml", "--search", "explicit", "--format", "json"]),
    ("plan-manual-region-ilp", ["plan", "configs/manual_free_axis.yaml", "--search", "ilp", "--format", "json"]),
    ("plan-conv-net-phased", ["plan", "configs/conv_net.yaml", "--format", "json"]),  # search_space
    ("plan-pipeline", ["plan", "tests/stages/tiny_gpt.yaml", "--devices", "4", "--format", "json"]),
    ("explain-ffn", ["explain", "configs/ffn.yaml", "h3", "--format", "json"]),
    ("explain-propagate", ["explain", "configs/megatron_mlp.yaml", "y", "--search", "propagate", "--format", "json"]),
    ("explain-pipeline", ["explain", "tests/stages/tiny_gpt.yaml", "--devices", "4", "--format", "json"]),
    ("simulate-ffn", ["simulate", "configs/ffn.yaml", "--format", "json"]),
    ("simulate-ffn-training", ["simulate", "configs/ffn.yaml", "--training", "--format", "json"]),
    ("simulate-pipeline", ["simulate", "tests/stages/tiny_gpt.yaml", "--devices", "4", "--format", "json"]),
    ("compare-ffn", ["compare", "configs/ffn.yaml", "--format", "json"]),
    ("describe", ["describe", '[{"x"}, {"y"}]', "--mesh", "x=2,y=2", "--shape", "4x6", "--format", "json"]),
    ("describe-sub-axis", ["describe", '[{"x":(1)2}, {}]', "--mesh", "x=4", "--shape", "4x6", "--format", "json"]),
    ("reshard", ["reshard", "--mesh", "x=2,y=2", "--shape", "4x8", "--from", '[{"x"}, {}]', "--to", '[{}, {"x"}]',
                 "--format", "json"]),
    ("reshard-verify", ["reshard", "--mesh", "x=2,y=2", "--shape", "4x8", "--from", '[{}, {}], unreduced={"y"}',
                        "--to", '[{"y"}, {}]', "--verify", "--format", "json"]),
    ("graph-ffn", ["graph", "configs/ffn.yaml", "--format", "json"]),
    *[(f"export-{to}-{name}", ["export", f"configs/{name}.yaml", "--to", to, *flags])
      for to in ("jax", "dtensor", "shardy", "mindspore")
      for name, flags in (("ffn", ["--format", "json"]), ("megatron_mlp", ["--training"]))],
    ("export-jax-module", ["export", "configs/ffn.yaml", "--to", "jax-module", "--format", "json"]),
    ("export-jax-pipeline", ["export", "tests/cli/pipeline_mlp.yaml", "--to", "jax"]),
    ("export-jax-pipeline-devices", ["export", "tests/stages/tiny_gpt.yaml", "--to", "jax", "--devices", "4"]),
]

# The example each table's checked-in file is made of: a small config, one command line.
EXAMPLE_CASES = {
    "plan": "plan-ffn-training-bfs", "plan --pipeline": "plan-pipeline", "explain": "explain-ffn", "explain --pipeline": "explain-pipeline",
    "simulate": "simulate-ffn-training", "simulate --pipeline": "simulate-pipeline",
    "compare": "compare-ffn", "check": "check", "describe": "describe", "reshard": "reshard-verify",
    "graph": "graph-ffn", "import-jax": "import-jax", "run": "run", "calibrate": "calibrate",
    **{f"export --to {to}": f"export-{to}-ffn" for to in ("jax", "dtensor", "shardy", "mindspore")},
    "export --to jax-module": "export-jax-module", "export --to jax --pipeline": "export-jax-pipeline",
}
SLOW = {"run": ["run", "configs/ffn.yaml", "--repeat", "1", "--format", "json"],
        "calibrate": ["calibrate", "--quick", "--devices", "2", "--out", "{tmp}/host.yaml", "--format", "json"]}


@pytest.fixture
def at_root(monkeypatch):
    monkeypatch.chdir(ROOT)  # the cases name configs/ relative to the repository, as the README does


@pytest.mark.parametrize("argv", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_every_key_of_the_output_is_documented_with_its_type(argv, capsys, at_root):
    data = run_json(argv, capsys)
    assert data["schema_version"] == SCHEMA_VERSION
    assert problems(data, section_of(data)) == []


def test_check_output_is_documented_before_and_after_a_baseline(tmp_path, capsys, at_root):
    first = run_json([*_check_args(tmp_path), "--update"], capsys)  # a new baseline: every model added
    again = run_json(_check_args(tmp_path), capsys)
    assert first["status"] == "updated" and again["status"] == "ok"
    assert problems(first, "check") == [] and problems(again, "check") == []


def test_import_jax_output_is_documented_and_its_model_file_plans(tmp_path, capsys, at_root):
    pytest.importorskip("jax")
    data = run_json(["import-jax", GPT_BLOCK, "--mesh", "dp=2,tp=4", "--format", "json"], capsys)
    assert problems(data, "import-jax") == []
    model = tmp_path / "block.json"  # the model_file object is a model file (JSON is YAML)
    model.write_text(json.dumps(data["model_file"]))
    assert run_json(["plan", str(model), "--format", "json"], capsys)["model"] == data["model"]


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(SLOW))
def test_jax_commands_output_is_documented(command, tmp_path):
    pytest.importorskip("jax")
    data = run_json_process([a.replace("{tmp}", str(tmp_path)) for a in SLOW[command]])
    assert problems(data, command) == []
    assert structure(data) == structure(_example(command))


@pytest.mark.slow
@pytest.mark.parametrize("config", sorted(p.name for p in (ROOT / "configs").glob("*.yaml")))
def test_plan_output_of_every_config_is_documented(config, capsys, at_root):
    # simulate's keys do not depend on the model (ffn covers them above); simulating every config takes minutes
    for argv in (["plan", f"configs/{config}"], ["plan", f"configs/{config}", "--training", "--search", "bfs"]):
        data = run_json([*argv, "--format", "json"], capsys)
        assert problems(data, argv[0]) == [], argv


def test_strategy_is_an_array_of_split_counts_and_redistributions_are_named_as_the_table_names_them(capsys, at_root):
    data = run_json(["plan", "configs/ffn.yaml", "--format", "json"], capsys)
    assert main(["plan", "configs/ffn.yaml"]) == 0
    text = capsys.readouterr().out
    (mm,) = [o for o in data["ops"] if o["name"] == "dense1.matmul"]
    # configs/ffn.yaml gives dense1.matmul the strategy ((2, 1), (1, 4)): rows of x in 2, columns of w1 in 4
    assert mm["strategy"] == [[2, 1], [1, 4]]
    assert "redistributions:" in text and "redistributions" in data and "reshards" not in data


def test_jax_export_partition_spec_entries_rebuild_the_printed_spec(capsys, at_root):
    data = run_json(["export", "configs/megatron_mlp.yaml", "--to", "jax"], capsys)

    def printed(entries) -> str:  # how jax prints P(*entries), lists as tuples
        def one(e):
            return "None" if e is None else repr(e) if isinstance(e, str) else "(" + ", ".join(map(repr, e)) + ")"
        return "P(" + ", ".join(one(e) for e in entries) + ")"

    specs = [*data["tensors"].values(), *data["outputs"].values(),
             *(s for op in data["ops"].values() for s in (*op["operands"], op["result"]))]
    assert all(printed(s["partition_spec_entries"]) == s["partition_spec"] for s in specs)
    # megatron_mlp shards w1's columns over tp: its spec is (None, "tp") with no eval of "P(None, 'tp')"
    assert data["tensors"]["w1"]["partition_spec_entries"] == [None, "tp"]


def test_dtensor_export_placement_objects_match_the_printed_placements(capsys, at_root):
    data = run_json(["export", "configs/megatron_mlp.yaml", "--to", "dtensor", "--training"], capsys)

    def printed(objects) -> str:
        return "[" + ", ".join(f"Shard({p['dim']})" if p["type"] == "Shard" else f"{p['type']}()"
                               for p in objects) + "]"

    entries = [*data["tensors"].values(), *(s for op in data["ops"].values() for s in (*op["operands"], op["result"]))]
    assert all(printed(e["placement_objects"]) == e["placements"] for e in entries)
    # the second matmul contracts over tp (w2 is split by rows): its result is a pending sum over tp
    partial = [p for op in data["ops"].values() for p in op["result"]["placement_objects"] if p["type"] == "Partial"]
    assert partial and all(p == {"type": "Partial", "reduce_op": "sum"} for p in partial)


# -- the document itself ----------------------------------------------------------------------------

def test_docs_version_is_the_version_the_outputs_carry():
    assert VERSION == SCHEMA_VERSION, "bump both: SCHEMA_VERSION in planner/cli/output.py and docs/json.md"
    changelog = re.findall(r"^\| (\d+\.\d+) \|", DOC.read_text(encoding="utf-8"), re.M)
    assert changelog and changelog[-1] == SCHEMA_VERSION, "docs/json.md's version table ends with this version"


def test_every_command_that_prints_a_result_takes_format_json():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in sub.choices.items():
        formats = next((a for a in parser._actions if "--format" in a.option_strings), None)
        assert formats is not None and "json" in formats.choices, f"shardplan {name} has no --format json"
        sections = [s for s in SECTIONS if s == name or s.startswith(f"{name} ")]
        assert sections, f"docs/json.md documents no JSON of shardplan {name}"


def test_every_table_documents_the_version_and_the_command():
    for section, rows in SECTIONS.items():
        assert rows["schema_version"].always and rows["command"].always, section


def test_units_agree_with_the_key_names():
    # a key's name says its unit: *_s is seconds, *bytes* bytes (bytes/s for a bandwidth), flops FLOPs
    for section, rows in SECTIONS.items():
        for path, row in rows.items():
            key = re.sub(r"[\[\]*.]+$", "", path).rsplit(".", 1)[-1].rstrip("[]")
            if path.endswith("[]") and row.types & {"array", "object"}:
                continue
            if "bytes" in key and key.endswith("per_s"):
                assert row.unit == "bytes/s", f"docs/json.md:{row.line}: {path} is bytes/s"
            elif key.endswith("per_s"):
                assert row.unit.endswith("/s"), f"docs/json.md:{row.line}: {path} is a rate"
            elif key.endswith("_s") and "number" in row.types:
                assert row.unit.startswith("seconds"), f"docs/json.md:{row.line}: {path} is seconds"
            elif "bytes" in key and row.types & {"integer", "number"}:
                assert row.unit == "bytes", f"docs/json.md:{row.line}: {path} is bytes"
            elif key in ("flops",) and row.types & {"integer", "number"}:
                assert row.unit == "FLOPs", f"docs/json.md:{row.line}: {path} is FLOPs"


def test_every_documented_path_hangs_below_a_documented_container():
    for section, rows in SECTIONS.items():
        for path, row in rows.items():
            parent = re.sub(r"(\[\]|\.[^.\[\]]+|\.\*{1,2})$", "", path)
            if parent != path and parent:
                assert parent in rows, f"docs/json.md:{row.line}: {path} without a row for {parent}"
                kind = "array" if path.endswith("[]") else "object"
                assert kind in rows[parent].types, f"docs/json.md:{row.line}: {parent} must be an {kind}"


def test_the_validator_finds_an_undocumented_key_a_wrong_type_and_a_missing_key(capsys, at_root):
    data = run_json(["graph", "configs/ffn.yaml", "--format", "json"], capsys)
    data["extra"] = 1
    data["ops"][0]["flops"] = "many"
    del data["totals"]
    found = problems(data, "graph")
    assert any(p.startswith("extra: not documented") for p in found)
    assert any(p.startswith("ops[].flops: is string") for p in found)
    assert any(p.startswith("totals: documented as present always") for p in found)
    assert len(found) == 3


# -- the checked-in examples ------------------------------------------------------------------------

def _slug(section: str) -> str:
    return section.replace(" --to ", "-").replace(" --", "-") + ".json"


def _example(section: str) -> dict:
    return json.loads((EXAMPLES / _slug(section)).read_text(encoding="utf-8"))


def tables() -> dict:
    """docs/json.md's tables without their prose: per section, every key path's types, unit and presence."""
    return {section: {path: [" or ".join(sorted(r.types)), r.unit, "always" if r.always else "when"]
                      for path, r in rows.items()} for section, rows in SECTIONS.items()}


def tables_text(t: dict) -> str:
    """:func:`tables` as JSON, one key path a line (a diff of two versions reads as one)."""
    return "{\n" + ",\n".join(f" {json.dumps(section)}: {{\n"
                               + ",\n".join(f"  {json.dumps(p)}: {json.dumps(v)}" for p, v in rows.items()) + "\n }"
                               for section, rows in t.items()) + "\n}\n"


def _pinned_path() -> Path:
    return EXAMPLES / f"schema-{SCHEMA_VERSION}.json"


def test_documented_keys_are_those_pinned_for_this_version():
    pinned = json.loads(_pinned_path().read_text(encoding="utf-8"))
    changed = sorted(f"{section}: {path}" for section in set(pinned) | set(tables())
                     for path in set(pinned.get(section, {})) | set(tables().get(section, {}))
                     if pinned.get(section, {}).get(path) != tables().get(section, {}).get(path))
    assert not changed, (f"docs/json.md changed documented keys under schema_version {SCHEMA_VERSION} ({changed}): "
                         "bump it (planner/cli/output.py, docs/json.md and its version table), then run "
                         "python tests/cli/test_json_contract.py")


def test_every_table_has_an_example_that_it_documents_at_this_version():
    for section in SECTIONS:
        example = _example(section)
        assert example["schema_version"] == SCHEMA_VERSION, _slug(section)
        assert problems(example, section) == [], _slug(section)


@pytest.mark.parametrize("section", [s for s in EXAMPLE_CASES if s not in SLOW])
def test_output_has_the_structure_of_its_checked_in_example(section, tmp_path, capsys, at_root):
    if section == "import-jax":
        pytest.importorskip("jax")
    *before, argv = _example_argv(section, tmp_path)
    for step in before:
        run_json(step, capsys)
    data = run_json(argv, capsys)
    changed = structure(data) ^ structure(_example(section))
    assert not changed, (f"the JSON of {section} on its example's input changed ({sorted(changed)}): where a key "
                         "was added, removed or retyped, document it in docs/json.md and bump SCHEMA_VERSION; then "
                         "rewrite the examples with python tests/cli/test_json_contract.py")


def _example_argv(section: str, tmp: Path) -> list[list[str]]:
    """The command lines of ``section``'s example: the last one prints it."""
    case = EXAMPLE_CASES[section]
    if case == "check":  # against a baseline of its own, written first (the shipped one changes with the costs)
        return [[*_check_args(tmp), "--update"], _check_args(tmp)]
    if case == "import-jax":
        return [["import-jax", GPT_BLOCK, "--mesh", "dp=2,tp=4", "--format", "json"]]
    if case in SLOW:
        return [[a.replace("{tmp}", str(tmp)) for a in SLOW[case]]]
    return [dict(CASES)[case]]


def example_of(data: dict) -> dict:
    """``data`` as checked in: wall-clock seconds zeroed, so that the file is the same on every machine."""
    rows = SECTIONS[section_of(data)]

    def strip(value, path):
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                doc = f"{path}.{k}" if path else k
                doc = doc if doc in rows else (f"{path}.*" if path else "*")
                out[k] = strip(v, doc)
            return out
        if isinstance(value, list):
            return [strip(v, path + "[]") for v in value]
        if path in rows and rows[path].unit == WALL_CLOCK and isinstance(value, float):
            return 0.0
        return value

    return strip(data, "")


def write_examples() -> None:
    """Rewrite every example from its command (the JAX ones only where missing or at a new version)."""
    import tempfile

    os.chdir(ROOT)
    EXAMPLES.mkdir(exist_ok=True)
    pinned = _pinned_path()
    if pinned.exists() and json.loads(pinned.read_text(encoding="utf-8")) != tables():
        raise SystemExit(f"docs/json.md changed documented keys but schema_version is still {SCHEMA_VERSION}; bump it "
                         "in planner/cli/output.py and docs/json.md first")
    pinned.write_text(tables_text(tables()), encoding="utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        for section in EXAMPLE_CASES:
            *before, argv = _example_argv(section, Path(tmp))
            target = EXAMPLES / _slug(section)
            old = json.loads(target.read_text(encoding="utf-8")) if target.exists() else None
            if section in SLOW and old is not None and old["schema_version"] == SCHEMA_VERSION:
                continue  # measured values: rewritten only when the contract changes
            for step in before:
                run_json_process(step)
            data = run_json_process(argv)
            for key, name in (("out", "host.yaml"), ("baseline", "baseline.json")):  # temporary paths
                if key in data:
                    data[key] = name
            target.write_text(json.dumps(example_of(data), indent=2) + "\n", encoding="utf-8")
            print(f"wrote {target.relative_to(ROOT)}")


if __name__ == "__main__":
    write_examples()
