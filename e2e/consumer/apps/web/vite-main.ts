import { installConsumerApi } from './page.js';

installConsumerApi(`${import.meta.env.BASE_URL}postguard-sw.js`);
document.body.dataset['ready'] = 'true';
