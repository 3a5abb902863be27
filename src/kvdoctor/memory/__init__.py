"""The memory arithmetic and the catalog: weights, KV bytes per token, the budget per vLLM era,
the ahead-of-launch plan, and the model and GPU facts it rests on. `memory.kvmath` is the one
import point for the arithmetic; `memory.catalog` reads the data files."""
