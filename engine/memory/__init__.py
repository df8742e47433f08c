"""Where a model's memory goes: the budget (`budget`), the plan that splits it between the
weights and the prompt cache and wires it on Metal (`plan`), the trie of KV states that
lets a request reuse a computed prefix (`prompt_cache`), and the interface the engine
thread fetches and stores KV states through (`store`).
"""
