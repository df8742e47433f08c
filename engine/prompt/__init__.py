"""Turning a conversation into tokens: the model's chat template (`chat`), the shield that
keeps untrusted text from becoming control tokens (`shield`), and the tokenizer wrapper
every layer reads token ids and texts through (`tokenizer`).
"""
