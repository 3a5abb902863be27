"""Fleet scans: `kvdoctor scan` over many logs, on a local process pool or on Ray.

targets (PATHs -> files, lazily) -> engines (`engine_local`, `engine_ray`: the per-file function
of `worker` on many processes) -> records (`record`: one small record per file, from the same
`Report` as `kvdoctor diagnose`) -> `summary` (counts and files per group) -> `formats` (text,
markdown, json, jsonl, html). Importing this package imports nothing else: Ray, fsspec and rich
are imported only by the parts that use them."""
