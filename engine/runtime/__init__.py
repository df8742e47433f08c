"""The engine thread: the only place that runs the model.

`scheduler` admits queued requests as rows of one decode batch; `reply` prepares a request
(its prompt, constraint, tools and sampler) and turns its tokens into a ChatResult;
`prefill` computes prompts in chunks; `batch` runs the decode loop, one forward pass per
step for every row; `sampling`, `speculative` and `logprobs` are what each row does with
its logits; `reply_text` turns tokens into streamed text; `context` fits a request to the
model's context window; `worker` is the long-lived thread itself; `handle` is what a
caller holds for a submitted request.
"""
