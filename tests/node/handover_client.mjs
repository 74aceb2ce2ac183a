// A client written with the official TypeScript MCP SDK that shows forms itself (form
// elicitation), for tests/test_mcp_typescript.py. Usage: node handover_client.mjs PYTHON
// [server args...]. It asks one foreground question; when the form arrives it prints
// {"event": "shown"} and answers it only after a line on standard input (the test starts a
// desk meanwhile); a form withdrawn by the server before that prints {"event": "withdrawn"}.
// Then it prints the call's result and a wait_for_answers result, one JSON line each.
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [python, ...serverArgs] = process.argv.slice(2);
const say = (event, data) => process.stdout.write(JSON.stringify({ event, ...data }) + "\n");
const input = createInterface({ input: process.stdin });
const lines = input[Symbol.asyncIterator]();

const transport = new StdioClientTransport({
  command: python,
  args: ["-m", "pi_agent_ask", "mcp", ...serverArgs],
  env: process.env,
  stderr: "inherit",
});
const client = new Client(
  { name: "ts-form-client", version: "1.0.0" },
  { capabilities: { elicitation: { form: {} } } },
);
client.setRequestHandler(ElicitRequestSchema, async (request, extra) => {
  extra.signal.addEventListener("abort", () => say("withdrawn", {}));
  say("shown", { message: request.params.message });
  await lines.next(); // the person answers in the client's form
  input.close();
  return { action: "accept", content: { db: "lite" } };
});
await client.connect(transport);

const ask = {
  questions: [
    {
      id: "db",
      prompt: "Which database?",
      options: [
        { label: "Postgres", value: "pg" },
        { label: "SQLite", value: "lite" },
      ],
    },
  ],
};
const options = { timeout: 600000 };
const asked = await client.callTool({ name: "ask_user", arguments: ask }, undefined, options);
say("asked", { result: asked.structuredContent ?? null, text: asked.content[0]?.text });
const waited = await client.callTool(
  { name: "wait_for_answers", arguments: {} },
  undefined,
  options,
);
say("waited", { result: waited.structuredContent });
await client.close();
