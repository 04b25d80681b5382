import { postguard } from 'postguard-ts/vite';

export default { plugins: [postguard()] };
