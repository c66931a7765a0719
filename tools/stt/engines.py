"""The two recognizers the bridge runs, behind one call: `transcribe(int16 samples at
16 kHz) -> text`, each call re-transcribing the whole open utterance (the decoders are
not incremental; what a partial costs grows with the utterance).

- Moonshine base-en (default): its .ort weights run by onnxruntime, with the greedy
  decode loop of `useful-moonshine-onnx` (its `generate`) and its tokenizer.json.
- Whisper tiny.en through faster-whisper (CTranslate2, int8), greedy, no timestamps,
  no conditioning on earlier text. Whisper pads every call to 30 s of audio, so a
  partial costs about the same at any utterance length.

Both count the seconds they spend and the audio seconds they heard (`busy_s`,
`audio_s`) for the real-time factor.
"""

import time

import numpy as np

import weights

ENGINES = ("moonshine", "whisper")


class Engine:
    name = ""

    def __init__(self):
        self.busy_s = 0.0
        self.audio_s = 0.0
        self.calls = 0

    def transcribe(self, samples):
        audio = np.frombuffer(samples, dtype=np.int16).astype(np.float32) / 32768.0
        t0 = time.perf_counter()
        text = self._run(audio)
        self.busy_s += time.perf_counter() - t0
        self.audio_s += len(audio) / 16000
        self.calls += 1
        return text

    def _run(self, audio):
        raise NotImplementedError


class Moonshine(Engine):
    name = "moonshine"
    # Moonshine's own bounds: at most ~6 tokens per second of audio, 0.1-64 s a call.
    TOKENS_PER_S = 6.5

    def __init__(self, threads=0, model_dir=None):
        super().__init__()
        import onnxruntime
        from moonshine_onnx.model import MoonshineOnnxModel
        from moonshine_onnx.transcribe import load_tokenizer

        d = model_dir or weights.fetch("moonshine-base-en")
        opts = onnxruntime.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        m = MoonshineOnnxModel.__new__(MoonshineOnnxModel)
        # MoonshineOnnxModel.__init__ for base with local .ort files, with our session options.
        m.encoder = onnxruntime.InferenceSession(f"{d}/encoder_model.ort", opts)
        m.decoder = onnxruntime.InferenceSession(f"{d}/decoder_model_merged.ort", opts)
        m.encoder_input_names = [x.name for x in m.encoder.get_inputs()]
        m.decoder_input_names = [x.name for x in m.decoder.get_inputs()]
        m.num_layers, m.num_key_value_heads, m.head_dim = 8, 8, 52
        m.decoder_start_token_id, m.eos_token_id = 1, 2
        self.model = m
        self.tokenizer = load_tokenizer()

    def _run(self, audio):
        if len(audio) < 1600:  # under 0.1 s: nothing Moonshine can read
            return ""
        audio = audio[: 64 * 16000 - 1]
        max_len = max(8, int(len(audio) / 16000 * self.TOKENS_PER_S))
        tokens = self.model.generate(audio[None, :], max_len=max_len)
        return self.tokenizer.decode_batch(tokens, skip_special_tokens=True)[0]


class Whisper(Engine):
    name = "whisper"

    def __init__(self, threads=0, model_dir=None):
        super().__init__()
        from faster_whisper import WhisperModel

        d = model_dir or weights.fetch("whisper-tiny-en")
        self.model = WhisperModel(d, device="cpu", compute_type="int8", cpu_threads=threads,
                                  local_files_only=True)

    def _run(self, audio):
        segments, _ = self.model.transcribe(
            audio, language="en", beam_size=1, best_of=1, temperature=0.0,
            without_timestamps=True, condition_on_previous_text=False, vad_filter=False)
        return " ".join(s.text.strip() for s in segments)


def load(name, threads=0):
    return {"moonshine": Moonshine, "whisper": Whisper}[name](threads=threads)
