"""The shortest real path: a broker process, a websocket client, an agent call, an answer."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import httpx
import websockets
from websockets.typing import Subprotocol

from tests.helpers.processes import broker, token

DEPLOY = {
    "action": "start",
    "questions": [
        {
            "id": "deploy_target",
            "prompt": "Which environment?",
            "type": "single",
            "options": [{"id": "staging"}, {"id": "production"}],
            "allowOther": False,
        }
    ],
}


async def _answer_one_questionnaire(ws_url: str, http_url: str) -> dict[str, Any]:
    sid = "smoke"
    async with websockets.connect(
        f"{ws_url}/v1/sessions/{sid}/ws", subprotocols=[Subprotocol("qbroker.v1.json")]
    ) as ws:
        await ws.send(json.dumps({"type": "hello", "token": token(sid, "client"), "client": {"kind": "bot"}}))
        assert json.loads(await asyncio.wait_for(ws.recv(), 5))["type"] == "welcome"
        assert json.loads(await asyncio.wait_for(ws.recv(), 5))["type"] == "idle"
        headers = {"Authorization": f"Bearer {token(sid, 'agent')}"}
        async with httpx.AsyncClient(base_url=http_url, headers=headers, timeout=15) as agent:
            call = asyncio.create_task(agent.post(f"/v1/sessions/{sid}/questionnaire?wait=10", json=DEPLOY))
            question = json.loads(await asyncio.wait_for(ws.recv(), 5))
            assert question["type"] == "question"
            await ws.send(
                json.dumps(
                    {
                        "type": "answer",
                        "questionnaireId": question["questionnaireId"],
                        "step": question["step"],
                        "questionId": "deploy_target",
                        "selectedOptionIds": ["production"],
                    }
                )
            )
            response = await asyncio.wait_for(call, 10)
            assert response.status_code == 200
            return cast(dict[str, Any], response.json())


def test_an_agent_gets_the_answer_a_client_gave() -> None:
    with broker() as process:
        result = asyncio.run(_answer_one_questionnaire(process.ws_url, process.url))
    text = result["content"][0]["text"]
    assert text.startswith("QUESTIONNAIRE_COMPLETED questionnaireId=")
    assert "deploy_target: optionIds=[production]" in text
    assert result["details"]["answers"] == [{"questionId": "deploy_target", "selectedOptionIds": ["production"]}]
