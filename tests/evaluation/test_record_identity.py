"""Identity in every record kind (issue 51): audits and attribute splits name the item set they scored."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
from benchmark_formats import write_sugarcrepe

from clip_cycles.attributes.concepts import ConceptAttributeData
from clip_cycles.benchmark_audit.adapters import load_benchmark
from clip_cycles.benchmark_audit.run import audit_identity
from clip_cycles.evaluation.attribute_runner import attribute_identity
from clip_cycles.evaluation.page_data import collect
from clip_cycles.results import benchmark_record, write_json


def test_an_audit_names_its_items_and_another_caption_is_another_item_set(tmp_path: Path) -> None:
    write_sugarcrepe(tmp_path / "sc")
    sets = load_benchmark("sugarcrepe", tmp_path / "sc")
    first = audit_identity("sugarcrepe", sets)
    assert first == audit_identity("sugarcrepe", load_benchmark("sugarcrepe", tmp_path / "sc"))  # read again: the same
    assert first["split"] == "all" and len(first["items_sha256"]) == 64 and first["source"]["kind"] == "benchmark"
    data = json.loads((tmp_path / "sc" / "add_obj.json").read_text())
    key = next(iter(data))
    data[key]["caption"] = data[key]["caption"] + " again"
    (tmp_path / "sc" / "add_obj.json").write_text(json.dumps(data))
    assert audit_identity("sugarcrepe", load_benchmark("sugarcrepe", tmp_path / "sc"))["items_sha256"] != first["items_sha256"]
    # A page reads the audit's item set: recorded, never "item set not recorded".
    record = benchmark_record("audit/sugarcrepe", "m", "a", {"cycle_acc": 0.5, "subsets": {}}, identity=first)
    write_json(record, tmp_path / "in" / "audit_sugarcrepe.json")
    (cell,) = collect([tmp_path / "in"]).cells.values()
    assert cell.item_set.recorded and cell.item_set.items_sha256 == first["items_sha256"]


def test_an_attribute_split_names_its_items_and_a_changed_label_is_another_item_set() -> None:
    labels = np.array([[1, 0], [0, 1], [1, 1]], dtype=bool)
    data = ConceptAttributeData(("a", "b", "c"), ("red", "round"), labels, (None, None, None))
    first = attribute_identity(data, "THINGS", {"groups": "/machine/path/groups.tsv:" + "f" * 64})
    assert first["split"] == "folds" and first["source"]["annotations"] == {"groups": "f" * 64}
    assert "/machine" not in json.dumps(first)  # files enter by content, never by path
    flipped = labels.copy()
    flipped[0, 0] = False
    other = attribute_identity(dataclasses.replace(data, labels=flipped), "THINGS", {"groups": "/x:" + "f" * 64})
    assert other["items_sha256"] != first["items_sha256"]
    moved = attribute_identity(data, "THINGS", {"groups": "/another/place/groups.tsv:" + "f" * 64})
    assert moved["items_sha256"] == first["items_sha256"]  # a copied root is the same item set
