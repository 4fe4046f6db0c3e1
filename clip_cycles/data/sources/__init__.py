"""Raw sources: the source registry (coco, gqa, shapes), COCO annotations, GQA scene graphs, images, the shapes world."""
