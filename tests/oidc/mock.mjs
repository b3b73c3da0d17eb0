// The OpenID Connect provider of the integration tests (tests/it/oauth.rs):
// oauth2-mock-server (npm, pinned in package-lock.json), nobody on the team
// wrote it. Started by the test harness (tests/it/harness/oidc.rs):
//
//   node tests/oidc/mock.mjs
//
// listens on a free loopback port, prints one JSON line
// {"issuer": "http://127.0.0.1:<port>", "control": "http://127.0.0.1:<port>"}
// and runs until its standard input closes (the test is over).
//
// The control server sets what the next sign-ins get (POST / with JSON):
//   {"sub", "email", "email_verified", "preferred_username"}  the ID token's claims
//   {"tamper": {"aud": "...", "iss": "...", "nonce": "..."}}   claims overwritten in the
//                                                                ID token (signed all the same)
//   {"kid": "..."}                                               the ID token's header names
//                                                                a key its JWKS lacks
//   {"refuse": true}                                             the token endpoint answers
//                                                                400 invalid_grant
// Each call replaces what was set before (fields left out are reset).
import http from "node:http";
import { OAuth2Server } from "oauth2-mock-server";

const server = new OAuth2Server();
await server.issuer.keys.generate("RS256");
await server.start(0, "127.0.0.1");
// The package names the issuer http://localhost:<port>; the gateway is
// configured with the address it listens on.
server.issuer.url = `http://127.0.0.1:${server.address().port}`;

let next = { claims: { sub: "johndoe" }, tamper: {}, kid: null, refuse: false };

server.service.on("beforeTokenSigning", (token) => {
  // The access token carries `scope`; the ID token carries `aud` (the client id).
  token.payload.sub = next.claims.sub;
  if ("scope" in token.payload) return;
  Object.assign(token.payload, next.claims, next.tamper);
  if (next.kid) token.header.kid = next.kid;
});

server.service.on("beforeResponse", (response) => {
  if (next.refuse) {
    response.statusCode = 400;
    response.body = { error: "invalid_grant", error_description: "the code was refused" };
  }
});

server.service.on("beforeUserinfo", (response) => {
  response.body = { ...next.claims };
});

const control = http.createServer((req, res) => {
  let body = "";
  req.on("data", (c) => (body += c));
  req.on("end", () => {
    try {
      const v = JSON.parse(body || "{}");
      const { tamper = {}, kid = null, refuse = false, ...claims } = v;
      next = { claims: { sub: "johndoe", ...claims }, tamper, kid, refuse };
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(next));
    } catch (e) {
      res.writeHead(400);
      res.end(String(e));
    }
  });
});
control.listen(0, "127.0.0.1", () => {
  const line = {
    issuer: server.issuer.url,
    control: `http://127.0.0.1:${control.address().port}`,
  };
  process.stdout.write(JSON.stringify(line) + "\n");
});

process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
