"""The reader: bytes -> lines -> joined lines -> events -> attempts -> facts.

`pipeline.analyse_lines` runs the whole stage; each module is one step of it."""
