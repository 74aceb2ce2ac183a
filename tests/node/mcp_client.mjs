// A client written with the official TypeScript MCP SDK, for tests/test_mcp_typescript.py.
// Usage: node mcp_client.mjs PYTHON [server args...]. It starts `PYTHON -m pi_agent_ask mcp`
// over stdio, lists the tools, compiles every inputSchema and outputSchema with Ajv's JSON
// Schema 2020-12 validator, asks one background question, prints one JSON line per step on
// standard output, and waits for a line on standard input (the test answers on the desk)
// before it waits for the answer, twice.
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import Ajv2020 from "ajv/dist/2020.js";

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
const client = new Client({ name: "ts-client", version: "1.0.0" });
await client.connect(transport);

const { tools } = await client.listTools();
const ajv = new Ajv2020({ strict: false, allErrors: true });
const compiled = [];
for (const tool of tools) {
  for (const key of ["inputSchema", "outputSchema"]) {
    if (tool[key] !== undefined) {
      ajv.compile(tool[key]); // throws on a schema that is not valid JSON Schema 2020-12
      compiled.push(`${tool.name}.${key}`);
    }
  }
}
say("listed", { tools: tools.map((tool) => tool.name), compiled });

const ask = {
  background: true,
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
const receipt = await client.callTool({ name: "ask_user", arguments: ask });
say("queued", { receipt: receipt.structuredContent });

await lines.next(); // the person answered on the desk
input.close(); // nothing more to read: standard input no longer keeps Node running
const first = await client.callTool({ name: "wait_for_answers", arguments: {} });
const second = await client.callTool({ name: "wait_for_answers", arguments: {} });
say("waited", { first: first.structuredContent, second: second.structuredContent });
await client.close();
