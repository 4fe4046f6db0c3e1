"""Read a benchmark subset back as plain tuples, for the format readers' mutation tests."""

from __future__ import annotations


def comparisons(cs) -> list[tuple]:
    """Per comparison: (comparison id, item id, image key, positive caption, negative caption, tags)."""
    out = []
    for c, comparison_id in enumerate(cs.comparison_ids):
        edges = [e for e in range(len(cs.edge_comparison)) if cs.edge_comparison[e] == c]
        positive = [cs.captions[cs.edge_caption[e]] for e in edges if cs.edge_weight[e] > 0]
        negative = [cs.captions[cs.edge_caption[e]] for e in edges if cs.edge_weight[e] < 0]
        images = {cs.images[cs.edge_image[e]].key for e in edges}
        assert len(positive) == len(negative) == len(images) == 1, (comparison_id, positive, negative, images)
        out.append((comparison_id, cs.item_ids[c], images.pop(), positive[0], negative[0], cs.tags[c]))
    return out


def blocks(cs) -> list[tuple]:
    """Per declared cycle: (image_0 key, image_1 key, caption of image_0, caption of image_1, tags)."""
    return [
        (cs.images[u1].key, cs.images[u2].key, cs.captions[v1], cs.captions[v2], cs.cycle_tags[k])
        for k, (u1, u2, v1, v2) in enumerate(cs.cycles)
    ]


def block_ids(cs) -> list[str]:
    """The item (block) ids in first-seen order."""
    return list(dict.fromkeys(cs.item_ids))
