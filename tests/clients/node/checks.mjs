// The official openai npm package against the in-process API server; run by tests/clients/test_openai_node.py.
// Reads LIFECYCLE_BASE_URL, LIFECYCLE_API_KEY, LIFECYCLE_MODEL, LIFECYCLE_CONTEXT_WINDOW and LIFECYCLE_RESPONSES_INPUT
// (the Responses calls' question) from the environment
// and prints one JSON object: what the client returned for each call (the Python test checks it).
import OpenAI from "openai";
import { VERSION } from "openai/version";

const baseURL = process.env.LIFECYCLE_BASE_URL;
const apiKey = process.env.LIFECYCLE_API_KEY;
const model = process.env.LIFECYCLE_MODEL;
const window = Number(process.env.LIFECYCLE_CONTEXT_WINDOW);
const messages = [{ role: "user", content: "Name a colour." }];
const greedy = { model, messages, max_tokens: 8, temperature: 0, seed: 1 };
const responsesGreedy = { model, input: process.env.LIFECYCLE_RESPONSES_INPUT, max_output_tokens: 32, temperature: 0 };

function client(key = apiKey, maxRetries = 0) {
  return new OpenAI({ baseURL, apiKey: key, maxRetries, timeout: 120_000 });
}

function caught(error) {
  return {
    class: error?.constructor?.name ?? typeof error,
    isAPIError: error instanceof OpenAI.APIError,
    status: error?.status ?? null,
    code: error?.code ?? null,
    param: error?.param ?? null,
    type: error?.type ?? null,
    requestID: error?.requestID ?? null,
    retryAfter: error?.headers?.get?.("retry-after") ?? null,
  };
}

async function expectFailure(call) {
  try {
    await call();
  } catch (error) {
    return caught(error);
  }
  return { class: "no error" };
}

const out = { node: process.version, sdk: VERSION };

// A plain call, with the raw response for its headers.
const { data: plain, response } = await client().chat.completions.create(greedy).withResponse();
out.plain = plain;
out.plainRequestId = response.headers.get("x-request-id");

// The same call streamed, usage asked for; every chunk kept as the client parsed it.
const stream = await client().chat.completions.create({ ...greedy, stream: true, stream_options: { include_usage: true } });
out.chunks = [];
for await (const chunk of stream) out.chunks.push(chunk);

// The stream helper: it assembles the chunks into a chat.completion of its own.
const runner = client().chat.completions.stream({ ...greedy, stream_options: { include_usage: true } });
out.finalContent = await runner.finalContent();
out.finalCompletion = await runner.finalChatCompletion();

// Logprobs with alternatives.
out.logprobs = await client().chat.completions.create({ ...greedy, logprobs: true, top_logprobs: 3 });

// The models list through the client's pagination.
out.models = [];
for await (const entry of client().models.list()) out.models.push(entry.id);
out.retrieved = await client().models.retrieve(model);
out.retrieveUnknown = await expectFailure(() => client().models.retrieve("gpt-9"));

// A wrong key: the client's AuthenticationError, not retried.
out.badKey = await expectFailure(() => client("sk-not-a-key", 2).chat.completions.create(greedy));

// A prompt longer than the window: a 400 the client surfaces at once (with its default retries).
const long = "hello" + " hello".repeat(window + 50);
out.tooLong = await expectFailure(() =>
  client(apiKey, 2).chat.completions.create({ model, messages: [{ role: "user", content: long }], max_tokens: 4 }),
);
out.tooLongStreamed = await expectFailure(async () => {
  const s = await client(apiKey, 2).chat.completions.create({
    model, messages: [{ role: "user", content: long }], max_tokens: 4, stream: true,
  });
  for await (const _ of s);
});

// The Responses API: a plain create (the client adds output_text), the same streamed with stream: true (every
// event as the client parsed it), and the stream helper, whose finalResponse needs response.completed.
out.response = await client().responses.create(responsesGreedy);
out.responseEvents = [];
for await (const event of await client().responses.create({ ...responsesGreedy, stream: true })) {
  out.responseEvents.push(event);
}
out.finalResponse = await client().responses.stream(responsesGreedy).finalResponse();

process.stdout.write(JSON.stringify(out));
