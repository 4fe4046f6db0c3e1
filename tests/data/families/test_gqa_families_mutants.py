"""GQA family verdicts through an index of several images, for the mutants the family tests leave alive.

The statement and verdict tests ask one scene graph behind an index that ignores the image id;
here the index holds two images whose answers differ, so a family that reads the wrong image
(or none) gives a wrong verdict. Expected verdicts are worked out in the comments from the
graphs written here. Fast (no builds), so the mutation run
(``benchmarks/mutation_score.py gqa_families``) can afford it for every mutant.
"""

from __future__ import annotations

from string import ascii_lowercase
from types import SimpleNamespace

from clip_cycles.data.families.registry import get_family
from clip_cycles.data.sources.scene_graphs import SceneGraph, parse_scene_graph

LEFT, RIGHT = "to the left of", "to the right of"


def graph(image_id: str, *objects: tuple) -> SceneGraph:
    """Objects (name, attributes, [(relation, target id)]) get ids a, b, c, ... in order."""
    raw = {}
    for k, (object_id, (name, attributes, relations)) in enumerate(zip(ascii_lowercase, objects)):
        raw[object_id] = {"name": name, "x": 10 * k, "y": 5, "w": 8, "h": 8, "attributes": list(attributes),
                          "relations": [{"name": r, "object": t} for r, t in relations]}  # fmt: skip
    parsed, reason, _ = parse_scene_graph(image_id, {"width": 200, "height": 100, "objects": raw}, "test")
    assert reason is None
    return parsed


# Image 1: a red cup left of a white plate, a man holding the cup. Image 2: the opposite of each:
# a blue cup right of a black plate, a woman holding the cup (no man).
GRAPHS = {
    1: graph("1", ("cup", ["red"], [(LEFT, "b")]), ("plate", ["white"], []), ("man", [], [("holding", "a")])),
    2: graph("2", ("cup", ["blue"], [(RIGHT, "b")]), ("plate", ["black"], []), ("woman", [], [("holding", "a")])),
}
INDEX = SimpleNamespace(graph=lambda image_id: GRAPHS[image_id])


def test_every_family_reads_the_image_it_is_asked_about():
    colour = {"object": "cup", "type": "color", "value": "red"}
    left = {"subject": "cup", "relation": LEFT, "object": "plate"}
    holding = {"subject": "man", "relation": "holding", "object": "cup"}
    binding = {"type": "color", "objects": [["cup", "red"], ["plate", "white"]]}
    cases = {
        # family: (meaning, verdict on image 1, verdict on image 2)
        "attribute_color": (colour, "true", "false"),  # image 2's only cup is blue
        "relation_spatial": (left, "true", "false"),  # image 2's cup is right of its plate
        "relation_object": (holding, "true", "false"),  # no man in image 2
        "relation_subject": (holding, "true", "false"),
        "binding": (binding, "true", "false"),  # blue cup, black plate in image 2
    }
    for name, (meaning, first, second) in cases.items():
        family = get_family("gqa", name)
        assert (family.verdict(INDEX, 1, meaning), family.verdict(INDEX, 2, meaning)) == (first, second), name
        assert (family.holds(INDEX, 1, meaning), family.holds(INDEX, 2, meaning)) == (True, False), name
