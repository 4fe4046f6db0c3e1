"""The one Registry: lazy targets, entry points, freeze, and one wording of its two errors."""

from __future__ import annotations

import json

import pytest

from clip_cycles.registry import Registry


def test_register_get_and_lazy_target_resolved_once() -> None:
    reg: Registry[object] = Registry("widget")
    reg.register("dumps", "json:dumps")
    reg.register("plain", 3)
    assert reg.get("dumps") is json.dumps
    assert reg.get("plain") == 3
    assert reg.names() == ["dumps", "plain"]
    assert "dumps" in reg and "nope" not in reg and 3 not in reg
    assert reg.entry("dumps").lazy and not reg.entry("plain").lazy


def test_names_sorted_unless_ordered() -> None:
    for ordered, expected in ((False, ["a", "b", "c"]), (True, ["c", "a", "b"])):
        reg: Registry[int] = Registry("widget", ordered=ordered)
        for name in ("c", "a", "b"):
            reg.register(name, 0)
        assert reg.names() == expected
        assert list(reg) == expected
        assert [name for name, _ in reg.items()] == expected
        assert reg.unknown_message("z") == f"unknown widget 'z'; registered: {', '.join(expected)}"


def test_duplicate_refused_unless_replace() -> None:
    reg: Registry[int] = Registry("widget")
    reg.register("a", 1)
    with pytest.raises(ValueError, match=r"widget 'a' is already registered \(by .*\); choose another name"):
        reg.register("a", 2)
    reg.register("a", 2, replace=True)
    assert reg.get("a") == 2


def test_unknown_names_the_registered_and_close_matches() -> None:
    reg: Registry[int] = Registry("score head")
    for name in ("bilinear", "linear", "mlp"):
        reg.register(name, 0)
    with pytest.raises(ValueError) as error:
        reg.get("bilinaer")
    assert (
        str(error.value)
        == "unknown score head 'bilinaer'; registered: bilinear, linear, mlp (did you mean 'bilinear', 'linear'?)"
    )
    with pytest.raises(ValueError) as error:
        reg.get("zzz")
    assert str(error.value) == "unknown score head 'zzz'; registered: bilinear, linear, mlp"


def test_a_name_that_is_not_a_string_is_unknown_and_a_part_can_be_named() -> None:
    reg: Registry[int] = Registry("source", ordered=True)
    for name in ("gqa", "coco", "shapes"):
        reg.register(name, 0)
    with pytest.raises(ValueError, match=r"^unknown source \['coco'\]; registered: gqa, coco, shapes \(did you mean 'coco'\?\)$"):
        reg.get(["coco"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^unknown source None; registered: gqa, coco, shapes$"):
        reg.entry(None)  # type: ignore[arg-type]
    assert ["coco"] not in reg
    assert (
        reg.unknown_message("shape", names=["coco", "gqa"], kind="family builder")
        == "unknown family builder 'shape'; registered: coco, gqa"
    )
    assert reg.unknown_message("shape") == "unknown source 'shape'; registered: gqa, coco, shapes (did you mean 'shapes'?)"


def test_check_free_refuses_what_register_refuses_and_registers_nothing() -> None:
    reg: Registry[int] = Registry("widget")
    reg.check_free("a")
    assert "a" not in reg
    reg.register("a", 1)
    with pytest.raises(ValueError, match=r"^widget 'a' is already registered \(by int\); choose another name"):
        reg.check_free("a")
    reg.check_free("a", replace=True)
    with pytest.raises(ValueError, match="non-empty string"):
        reg.check_free("")
    reg.freeze()
    with pytest.raises(ValueError, match="frozen"):
        reg.check_free("b")


def test_freeze_refuses_registration_and_removal() -> None:
    reg: Registry[int] = Registry("widget")
    reg.register("a", 1)
    reg.freeze()
    with pytest.raises(ValueError, match="frozen"):
        reg.register("b", 2)
    with pytest.raises(ValueError, match="frozen"):
        reg.unregister("a")
    assert reg.get("a") == 1


def test_decorator_registers_and_returns_the_object() -> None:
    reg: Registry[object] = Registry("widget")

    @reg.decorator("f")
    def f() -> int:
        return 7

    assert reg.get("f") is f and f() == 7


def test_entry_points_read_lazily_and_code_registration_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib import metadata

    points = metadata.EntryPoints(
        [
            metadata.EntryPoint(name="ep", value="json:loads", group="clip_cycles.test_widgets"),
            metadata.EntryPoint(name="both", value="json:loads", group="clip_cycles.test_widgets"),
        ]
    )
    calls = []

    def fake_entry_points(group: str) -> metadata.EntryPoints:
        calls.append(group)
        return points

    monkeypatch.setattr(metadata, "entry_points", fake_entry_points)
    reg: Registry[object] = Registry("widget", entry_point_group="clip_cycles.test_widgets")
    reg.register("both", "json:dumps")
    assert calls == []  # nothing read at construction or registration
    assert reg.get("ep") is json.loads
    assert reg.get("both") is json.dumps
    assert reg.entry("ep").origin == "entry point"
    assert reg.entry("ep").distribution is None and reg.entry("ep").version is None  # no distribution behind it
    assert reg.names() == ["both", "ep"]
    assert calls == ["clip_cycles.test_widgets"]  # read once


def test_origin_marks_builtin_entries_and_refuses_a_made_up_one() -> None:
    reg: Registry[int] = Registry("widget")
    reg.register("shipped", 1, origin="builtin")
    reg.register("mine", 2)
    assert reg.entry("shipped").origin == "builtin" and reg.entry("mine").origin == "registered"
    with pytest.raises(ValueError, match="origin of a widget registered in code must be one of"):
        reg.register("other", 3, origin="entry point")
    assert "other" not in reg


def test_entry_point_entries_carry_their_distribution_and_version(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    info = tmp_path / "widgetdist-1.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: widgetdist\nVersion: 1.2\n")
    (info / "entry_points.txt").write_text("[clip_cycles.test_widgets_dist]\nloads = json:loads\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg: Registry[object] = Registry("widget", entry_point_group="clip_cycles.test_widgets_dist")
    entry = reg.entry("loads")
    assert (entry.origin, entry.distribution, entry.version, entry.target) == ("entry point", "widgetdist", "1.2", "json:loads")
    assert reg.get("loads") is json.loads


def test_description_is_read_without_resolving_the_target() -> None:
    reg: Registry[object] = Registry("widget")
    reg.register("lazy", "no_such_module_anywhere:thing", description="one line")
    assert reg.entry("lazy").description == "one line"  # no import was attempted
    with pytest.raises(ModuleNotFoundError):
        reg.get("lazy")
