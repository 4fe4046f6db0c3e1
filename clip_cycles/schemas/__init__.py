"""Declared file formats: one pydantic model per format, and the messages made from its errors.

A format (a task YAML, ``build_info.json``, a result record, an additive-audit report,
a benchmark root's files) is declared once as a model; validation, the error message
(file, field path, what was found, what is allowed) and the JSON Schema shipped under
``clip_cycles/schemas/json/`` all come from that declaration. This layer sits just
above ``fingerprints`` and ``settings`` so that ``data/`` and ``results`` can use it.
"""
