"""The load bots' Other and clarification texts never look like a credential, so the broker's
secrets guard (docs/protocol.md, "Pasted secrets") never refuses a bot's frame and the
verifier's expectations hold without the confirmation flag."""

from __future__ import annotations

import random

from broker.core.secret_shapes import looks_like_secret
from clients.bots.plan import Rates, Shape, make_plan


def test_every_text_a_bot_sends_passes_the_secrets_guard() -> None:
    rng = random.Random(27)
    shape = Shape(questions=20, options=6, multi_share=0.5, other_share=1.0)
    texts: list[str] = []
    for round_number in range(200):
        tag = f"bots-{rng.getrandbits(32):08x}-{rng.randrange(10_000)}-{round_number}"
        plan = make_plan(rng, shape, Rates(clarify=1.0), tag)
        texts += [pick.sent_other for pick in plan.answers + [d for d in plan.drafts if d] if pick.sent_other]
        texts += [plan.request(number) for number in (1, 2)]
    assert len(texts) > 2000
    flagged = [text for text in texts if looks_like_secret(text) is not None]
    assert flagged == []
