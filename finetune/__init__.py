"""Monthly LoRA adapter pipeline: dataset from new data -> train (peft) -> evaluate -> publish to vLLM.

Only data whose audience is the adapter's audience (by default: documents open to `everyone`) may be
trained on, so that a model never becomes a side door around the ACLs.
"""
