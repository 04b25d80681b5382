import { PostGuard } from 'postguard-ts/client';

const env = import.meta.env;
const pg = new PostGuard({ pkgUrl: env.VITE_PKG_URL, cryptifyUrl: env.VITE_CRYPTIFY_URL, allowInsecureUrls: true });
const form = document.querySelector('form')!;
form.addEventListener('submit', async (event) => {
  event.preventDefault();
  const files = form.querySelector<HTMLInputElement>('input[type=file]')!.files!;
  const to = form.querySelector<HTMLInputElement>('input[type=email]')!.value;
  const sign = pg.sign.yivi({ element: '#qr' });
  const { uuid } = await pg.encrypt({ files, recipients: [pg.recipient.email(to)], sign }).upload();
  document.querySelector('output')!.textContent = uuid;
});
