// The AI SDK (`ai` with `@ai-sdk/openai-compatible`, pinned in
// package.json) pointed at the gateway's /api/v1, as an application would
// be: `embed` and `embedMany` on the embedding model GATEWAY_MODEL.
// Prints one JSON line per call: what the SDK reported (tokens), what the
// answer said it cost (`usage.cost`, 8 decimals) and its request id, for
// the caller (tests/it/clients.rs) to check against the usage records.
import { embed, embedMany } from "ai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";

const base = process.env.GATEWAY_BASE_URL;
const key = process.env.GATEWAY_KEY;
const model = process.env.GATEWAY_MODEL;
if (!base || !key || !model) {
  throw new Error("GATEWAY_BASE_URL, GATEWAY_KEY and GATEWAY_MODEL are required");
}
const gateway = createOpenAICompatible({ name: "gateway", baseURL: base, apiKey: key });
const embedder = gateway.embeddingModel(model);

function line(what, vectors, tokens, response) {
  const body = typeof response.body === "string" ? JSON.parse(response.body) : response.body;
  const cost = body?.usage?.cost;
  if (typeof cost !== "number") {
    throw new Error(`${what}: usage.cost is not a number: ${JSON.stringify(body?.usage)}`);
  }
  console.log(
    JSON.stringify({
      what,
      vectors: vectors.length,
      dimensions: vectors[0].length,
      tokens,
      cost: cost.toFixed(8),
      request_id: response.headers["x-request-id"],
      model: response.headers["x-gateway-model"],
    }),
  );
}

const one = await embed({ model: embedder, value: "sunny day at the beach" });
line("embed", [one.embedding], one.usage.tokens, one.response);

const many = await embedMany({
  model: embedder,
  values: ["sunny day at the beach", "rainy afternoon in the city", "snowy night"],
});
if (many.responses.length !== 1) {
  throw new Error(`embedMany: one call expected, got ${many.responses.length}`);
}
line("embedMany", many.embeddings, many.usage.tokens, many.responses[0]);
console.log("ok");
