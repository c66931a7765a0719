"""One chat-completions request over HTTP, standard library only.

Why: the agent loop and a quick test of a prompt need to reach a local LLM server
(llama.cpp's `llama-server`, Ollama, vLLM, or any OpenAI-compatible endpoint) without
pulling in an SDK. `chat` posts `{"model", "messages", ...}` to `URL/chat/completions`
and returns `choices[0].message.content`; `achat` does it on a worker thread for
asyncio agents. No streaming, no retries: an agent framework's own LLM service is the
place for those.

    chat("http://127.0.0.1:8080/v1", messages)                    # llama-server
    chat("http://127.0.0.1:11434/v1", messages, model="qwen2.5:1.5b")   # Ollama
"""

import asyncio
import json
import urllib.error
import urllib.request


class LLMError(Exception):
    """The LLM server could not be reached, refused the request, or answered in a
    shape that is not a chat completion."""


def chat_url(url):
    """`URL/chat/completions` for a base URL (`http://host:port/v1`); a URL that already
    ends in `/chat/completions` is used as given."""
    url = url.rstrip("/")
    return url if url.endswith("/chat/completions") else url + "/chat/completions"


def chat(url, messages, *, model=None, timeout=60.0, api_key=None, **params):
    """Sends `messages` (a list of {"role", "content"}) and returns the assistant's reply
    text. `params` go into the request body as given (`temperature=0.2`,
    `max_tokens=100`). Raises LLMError."""
    body = {"messages": list(messages), **params}
    if model:
        body["model"] = model
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    target = chat_url(url)
    request = urllib.request.Request(target, data=json.dumps(body).encode("utf-8"),
                                     headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            data = json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as e:
        detail = e.read().decode("utf-8", "replace")[:300]
        raise LLMError(f"{target}: HTTP {e.code}: {detail}") from None
    except (urllib.error.URLError, OSError) as e:
        raise LLMError(f"{target}: {getattr(e, 'reason', e)}") from None
    except ValueError as e:
        raise LLMError(f"{target}: the answer is not JSON: {e}") from None
    try:
        content = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise LLMError(f"{target}: no choices[0].message.content in {str(data)[:300]}") from None
    return content if isinstance(content, str) else ""


async def achat(url, messages, **options):
    """`chat` for asyncio, on a worker thread (the event loop keeps running)."""
    return await asyncio.to_thread(chat, url, messages, **options)
