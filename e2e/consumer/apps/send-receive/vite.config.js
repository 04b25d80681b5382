import { postguard } from 'postguard-ts/vite';

export default {
  plugins: [postguard()],
  build: { rollupOptions: { input: ['send.html', 'receive.html'] } },
};
