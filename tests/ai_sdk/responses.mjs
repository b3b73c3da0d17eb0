// The AI SDK's default OpenAI provider (`openai(model)` of @ai-sdk/openai,
// pinned in package.json), which speaks the Responses API, pointed at the
// gateway's /api/v1 as an application would be: `generateText`,
// `streamText` and a tool call on the chat model GATEWAY_MODEL. Prints one
// JSON line per call: what the SDK reported (text, tokens) and, where the
// SDK hands the answer's body over, its `usage.cost` and request id, for
// the caller (tests/it/responses.rs) to check against the usage records.
import { generateText, streamText, tool } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { z } from "zod";

const base = process.env.GATEWAY_BASE_URL;
const key = process.env.GATEWAY_KEY;
const model = process.env.GATEWAY_MODEL;
if (!base || !key || !model) {
  throw new Error("GATEWAY_BASE_URL, GATEWAY_KEY and GATEWAY_MODEL are required");
}
const openai = createOpenAI({ baseURL: base, apiKey: key });

function line(what, result, extra = {}) {
  const body = result.response?.body;
  const parsed = typeof body === "string" ? JSON.parse(body) : body;
  console.log(
    JSON.stringify({
      what,
      text: result.text,
      input: result.usage.inputTokens,
      output: result.usage.outputTokens,
      cost: parsed?.usage?.cost?.toFixed(8) ?? null,
      id: parsed?.id ?? result.response?.id ?? null,
      ...extra,
    }),
  );
}

const generated = await generateText({
  model: openai(model),
  prompt: "Hello there",
  maxOutputTokens: 16,
});
if (!generated.text) throw new Error("generateText: no text");
line("generate", generated);

const streamed = streamText({ model: openai(model), prompt: "Tell me a story", maxOutputTokens: 8 });
let deltas = "";
for await (const d of streamed.textStream) deltas += d;
const streamedText = await streamed.text;
if (deltas !== streamedText || !deltas) throw new Error(`streamText: ${deltas} != ${streamedText}`);
line("stream", { text: streamedText, usage: await streamed.usage, response: await streamed.response });

const called = await generateText({
  model: openai(model),
  prompt: "What is the weather in Paris?",
  tools: { get_weather: tool({ description: "The weather in a city", inputSchema: z.object({ city: z.string() }) }) },
  toolChoice: "required",
});
const call = called.toolCalls[0];
if (!call || call.toolName !== "get_weather" || typeof call.input.city !== "string") {
  throw new Error(`tool call: ${JSON.stringify(called.toolCalls)}`);
}
line("tool", called, { tool: call.toolName });
