// An MCP client built on the official TypeScript SDK that authorizes
// itself the way the MCP authorization spec describes: its first request
// gets a 401, it reads the protected resource metadata the challenge
// names, discovers the authorization server and gets an access token with
// the client credentials grant (the SDK's ClientCredentialsProvider), then
// retries. gateway/oauth_test.go runs it with node and reads the one JSON
// line it prints.
//
// Environment: MCP_URL (the /mcp endpoint), OAUTH_CLIENT_ID,
// OAUTH_CLIENT_SECRET, OAUTH_SCOPE (the SDK asks for the provider's
// configured scope in this grant, not the challenge's), OAUTH_ISSUER (the
// authorization server the credentials belong to: the SDK sends them
// nowhere else), OAUTH_AUDIENCE (optional: sent as the audience
// parameter, which Ory Hydra reads instead of RFC 8707's resource; the SDK
// sends resource too), MCP_TOOL and MCP_ARGS (a tool to call, JSON
// arguments).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';

class AudienceProvider extends ClientCredentialsProvider {
  constructor(options, audience) {
    super(options);
    this.audience = audience;
  }

  prepareTokenRequest(scope) {
    const params = super.prepareTokenRequest(scope);
    if (this.audience) params.set('audience', this.audience);
    return params;
  }
}

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};

const provider = new AudienceProvider(
  {
    clientId: env('OAUTH_CLIENT_ID'),
    clientSecret: env('OAUTH_CLIENT_SECRET'),
    scope: env('OAUTH_SCOPE'),
    expectedIssuer: env('OAUTH_ISSUER'),
    clientName: 'mcpgrain-ts-test',
  },
  process.env.OAUTH_AUDIENCE,
);
const requests = [];
const transport = new StreamableHTTPClientTransport(new URL(env('MCP_URL')), {
  authProvider: provider,
  fetch: async (url, init) => {
    const res = await fetch(url, init);
    requests.push(`${init?.method ?? 'GET'} ${new URL(url).pathname} ${res.status}`);
    if (res.status >= 400) {
      process.stderr.write(`${init?.method ?? 'GET'} ${url} -> ${res.status} ${res.headers.get('www-authenticate') ?? ''}\n`);
    }
    return res;
  },
});
const client = new Client({ name: 'mcpgrain-ts-oauth-test', version: '1.0.0' });
await client.connect(transport);
const tools = await client.listTools();
const result = await client.callTool({ name: env('MCP_TOOL'), arguments: JSON.parse(process.env.MCP_ARGS ?? '{}') });
console.log(JSON.stringify({
  tools: tools.tools.map((t) => t.name),
  result,
  scope: provider.tokens()?.scope ?? '',
  requests,
}));
await client.close();
