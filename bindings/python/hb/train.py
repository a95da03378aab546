"""hb.train: a training loop that evaluates every N steps.

Every ``eval_every`` steps (and after the last one) the metrics are reset,
``eval_fn(step, metrics)`` feeds them (``metric.update(...)``) and their
results are collected. With a context, the ranks agree through
hb_data_sync when to stop, so ranks with more data than others neither hang
nor skip a collective: evaluation happens at the same steps on every rank
(metric results with a context are collective).
"""

import collections

from ._errors import HbValueError

EvalResult = collections.namedtuple("EvalResult", "step values")

_END = object()


def evaluate(step, eval_fn, metrics, on_eval=None):
    """Reset metrics, run eval_fn(step, metrics), return an EvalResult."""
    for m in metrics.values():
        m.reset()
    eval_fn(step, metrics)
    result = EvalResult(step, {name: m.result() for name, m in metrics.items()})
    if on_eval is not None:
        on_eval(result)
    return result


def train(step_fn, data, eval_every, eval_fn, metrics=None, max_steps=None, ctx=None,
          drop_remainder=False, on_eval=None):
    """Run step_fn(step, batch) over data; evaluate every eval_every steps.

    batch is None on a step where this rank is out of data but others are
    not (ctx given, drop_remainder False). metrics: a dict name -> hb.Metric.
    Returns the list of EvalResult, in step order.
    """
    if eval_every < 1:
        raise HbValueError("eval_every: must be >= 1, got %r" % (eval_every,))
    metrics = dict(metrics or {})
    history = []
    batches = iter(data)
    step = 0
    while max_steps is None or step < max_steps:
        batch = next(batches, _END)
        has_data = batch is not _END
        if ctx is not None:
            go_on, empty = ctx.data_sync(has_data, drop_remainder)
        else:
            go_on, empty = has_data, False
        if not go_on:
            break
        step += 1
        step_fn(step, None if empty or not has_data else batch)
        if step % eval_every == 0:
            history.append(evaluate(step, eval_fn, metrics, on_eval))
    if step and step % eval_every:
        history.append(evaluate(step, eval_fn, metrics, on_eval))
    return history
