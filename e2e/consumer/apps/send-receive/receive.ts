import { PostGuard } from 'postguard-ts/client';

const env = import.meta.env;
const pg = new PostGuard({ pkgUrl: env.VITE_PKG_URL, cryptifyUrl: env.VITE_CRYPTIFY_URL, allowInsecureUrls: true });
const uuid = new URLSearchParams(location.search).get('uuid')!;
const opened = await pg.open({ uuid }).decrypt({ element: '#qr', output: 'entries' });
if (opened.output !== 'entries') throw new Error('asked for entries');
const { headline, lines } = opened.sender;
document.querySelector('#sender')!.textContent = `${headline}: ${lines[0]?.policy.con[0]?.v}`;
for (const entry of opened.entries) {
  const link = document.createElement('a');
  link.href = URL.createObjectURL(await entry.blob());
  link.download = link.textContent = entry.name;
  document.querySelector('#files')!.append(link);
}
