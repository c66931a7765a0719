"""A stand-in for an OpenAI-compatible LLM server (llama.cpp's `llama-server`, Ollama):
`POST /v1/chat/completions` on 127.0.0.1 at an ephemeral port, standard library only.
It records every request body and answers with a reply made from it (the last user
message and the citation numbers it was given), so a test sees what reached the LLM
and that the answer came back. `status=` makes it answer with an HTTP error instead."""

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ChatServer:
    """`with ChatServer() as llm: chat(llm.url, messages)`; `llm.requests` are the
    request bodies received, in order."""

    def __init__(self, status=200):
        self.requests = []
        self.status = status
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                request = json.loads(body)
                outer.requests.append(request)
                if outer.status != 200:
                    return self._send(outer.status, {"error": {"message": "overloaded"}})
                self._send(200, {"object": "chat.completion", "model": request.get("model", ""),
                                 "choices": [{"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant",
                                                          "content": reply_to(request)}}]})

            def _send(self, status, payload):
                data = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def reply_to(request):
    """"Reply to QUESTION, citing [1]": the last user message, and the first source
    number of the system message (none: "citing nothing")."""
    messages = request.get("messages") or []
    question = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
    system = next((m["content"] for m in messages if m.get("role") == "system"), "")
    numbers = re.findall(r"^\[(\d+)\]", system, re.M)
    return f"Reply to {question}, citing " + (f"[{numbers[0]}]" if numbers else "nothing")
